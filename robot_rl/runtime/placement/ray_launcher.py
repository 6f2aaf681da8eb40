"""``robot-rl train`` with ``runtime.transport: ray``: the supervisor's launcher for a Ray cluster. The learner is
a local process (as with the local launcher), the gateway a Ray actor on this node, the actors Ray actors on nodes
with the custom resource ``runtime.actor_resource`` (see :mod:`robot_rl.runtime.placement.ray_bridge`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from robot_rl.runtime.placement.local import LocalLauncher, Process
from robot_rl.runtime.placement.ray_bridge import RemoteActor
from robot_rl.runtime.placement.ray_gateway import Gateway, require_token_auth
from robot_rl.runtime.transport.names import run_key
from robot_rl.training.config import TrainConfig
from robot_rl.utils.log import get_logger

log = get_logger(__name__)

READY_TIMEOUT = 120.0  # seconds the first actors wait for each other before they start acting anyway


class RayActorProcess:
    """A remote actor seen through the :class:`~robot_rl.runtime.placement.local.Process` methods."""

    def __init__(self, handle: Any, ref: Any) -> None:
        self.handle, self.ref, self.returncode = handle, ref, None

    def poll(self) -> int | None:
        import ray  # optional: ray

        if self.returncode is None and ray.wait([self.ref], timeout=0)[0]:
            try:
                ray.get(self.ref)
                self.returncode = 0
            except ray.exceptions.RayError as exc:
                log.error("remote actor failed: %s", exc)
                self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import ray  # optional: ray

        if not ray.wait([self.ref], timeout=timeout)[0]:
            raise subprocess.TimeoutExpired("remote actor", timeout or 0)
        return self.poll()  # type: ignore[return-value]

    def terminate(self) -> None:
        """A clean stop (see :meth:`RemoteActor.stop`); :meth:`kill` if it has not ended within ``wait``."""
        self.handle.stop.remote()

    def kill(self) -> None:
        import ray  # optional: ray

        ray.kill(self.handle, no_restart=True)
        self.returncode = -9 if self.returncode is None else self.returncode


class RayLauncher:
    """Joins (or starts) the Ray cluster, starts the gateway, and places the actors on robot nodes."""

    def __init__(self, cfg: TrainConfig, run_dir: Path) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.local = LocalLauncher(run_dir)
        self.config_text = (run_dir / "config.yaml").read_text()
        self.gateway: Any = None
        self._owns_ray = False

    def setup(self) -> None:
        require_token_auth()
        # optional: ray
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        rt = self.cfg.runtime
        if not ray.is_initialized():
            if rt.ray_address == "local":
                ray.init(address="local", resources={rt.actor_resource: rt.num_actors}, include_dashboard=False,
                         _node_ip_address="127.0.0.1")
            else:
                ray.init(address=rt.ray_address)
            self._owns_ray = True
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        self.gateway = ray.remote(Gateway).options(num_cpus=0, scheduling_strategy=here).remote(
            self.config_text, str(self.run_dir.resolve()))
        self.gateway.expect.remote(rt.num_actors, READY_TIMEOUT)
        ray.get(self.gateway.status.remote())  # fail here, with its error, if it cannot start

    def start_learner(self, resume: bool) -> Process:
        return self.local.start_learner(resume)

    def start_actor(self, index: int, incarnation: int) -> Process:
        import ray  # optional: ray

        rt = self.cfg.runtime
        handle = ray.remote(RemoteActor).options(num_cpus=0, resources={rt.actor_resource: 1},
                                                 max_concurrency=2).remote(  # run() + stop()
            self.config_text, run_key(self.run_dir), index, incarnation, self.gateway)
        return RayActorProcess(handle, handle.run.remote())

    def check_actor_death(self, index: int, code: int) -> None:
        import ray  # optional: ray

        try:  # a dead gateway takes every remote actor with it: say so instead of burning the restarts
            ray.get(self.gateway.status.remote(), timeout=30)
        except ray.exceptions.RayError as exc:
            raise RuntimeError(f"the learner gateway died ({type(exc).__name__}); what it acked is in "
                               f"{self.run_dir / 'spool'}: continue with --resume {self.run_dir}") from exc

    def teardown(self) -> None:
        import ray  # optional: ray

        if self.gateway is not None:
            ray.kill(self.gateway)
            self.gateway = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
