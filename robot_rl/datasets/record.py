"""Recording demonstrations into datasets in the replay format.

A demo dataset is a replay store (see :mod:`robot_rl.replay.store`) with one partition, ``demos``, written episode
by episode with :class:`~robot_rl.replay.store.EpisodeWriter` (every frame stored once), plus ``dataset.json``:
how it was recorded (env id and kwargs, device, noise, seed) and one record per kept episode (reset seed, length,
return, success label). It loads with ``load_transitions`` or ``ReplayBuffer.add_dataset`` like any store.

Devices produce the actions. Only ``scripted`` exists now: the task's privileged-state expert
(``env.unwrapped.expert_action(noise)``) with Gaussian action noise, so demos are not identical. Human devices
(spacemouse, gamepad, keyboard: issue #7) will implement the same small interface (``start``, ``action``,
``close``) and add success labelling and discarding by the operator.

Reproducibility: attempt ``k`` of a recording resets the env with ``episode_seed(seed, k)``, and the expert's
noise comes from the env's own generator, so the same seed, task and kwargs give the same dataset (on the same
MuJoCo build). The reset seed of every kept episode is stored, so a state-only episode can be re-simulated.

Atomicity: a recording is written under a temporary name beside the target and renamed when complete, so a crash
never leaves a half dataset at the target path; stale temporary folders of dead processes are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.utils.process import pid_alive
from robot_rl.utils.state_io import atomic_write

DEFAULT_NOISE = 0.1
DEMO_PARTITION = "demos"
META_FILE = "dataset.json"
META_FORMAT, META_VERSION = "robot_rl.demos", 1
DEVICES = ("scripted", "spacemouse", "gamepad", "keyboard")
AVAILABLE_DEVICES = ("scripted",)


class DeviceUnavailableError(ValueError):
    """A demo device that is unknown or not implemented yet."""


class ScriptedDevice:
    """The task's scripted expert on privileged sim state, plus Gaussian noise (std ``noise``, action units)."""

    name = "scripted"

    def __init__(self, noise: float = DEFAULT_NOISE) -> None:
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.noise = float(noise)

    def start(self, env: Any) -> None:
        if not callable(getattr(env.unwrapped, "expert_action", None)):
            raise ValueError(f"{env.spec.id if env.spec else env}: this env has no scripted expert "
                             "(env.unwrapped.expert_action); --device scripted needs a sim task with one")

    def action(self, env: Any, obs: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(env.unwrapped.expert_action(self.noise), np.float32)

    def close(self) -> None:
        pass


def make_device(name: str, noise: float = DEFAULT_NOISE) -> ScriptedDevice:
    """The action source called ``name``; a clear error for devices that are unknown or still to come."""
    if name == "scripted":
        return ScriptedDevice(noise)
    if name in DEVICES:
        raise DeviceUnavailableError(
            f"device {name!r} is not available yet: recording from human devices (spacemouse, gamepad, keyboard) "
            f"is planned (issue #7); available now: {', '.join(AVAILABLE_DEVICES)}")
    raise DeviceUnavailableError(f"unknown device {name!r} (devices: {', '.join(DEVICES)}; "
                                 f"available now: {', '.join(AVAILABLE_DEVICES)})")


def resolve_env_id(name: str) -> str:
    """A gymnasium id from a task name (``reach``, ``PickCube``, ``PickCube-v0``) or an id (returned as is)."""
    from gymnasium.envs.registration import registry

    if "/" in name or name in registry:
        return name
    import robot_rl_sim  # noqa: F401  (registers the sim tasks)

    tasks = {k.split("/", 1)[1]: k for k in registry if k.startswith("robot_rl/")}
    wanted = name.lower()
    for short, env_id in sorted(tasks.items()):
        if wanted in (short.lower(), short.split("-v")[0].lower()):
            return env_id
    raise ValueError(f"unknown task {name!r}: not a registered gymnasium id and not a sim task "
                     f"(sim tasks: {', '.join(sorted(tasks))})")


def episode_seed(seed: int, attempt: int) -> int:
    """The env reset seed of recording attempt ``attempt`` (independent streams per (seed, attempt))."""
    return int(np.random.SeedSequence([int(seed), int(attempt)]).generate_state(1)[0])


def _kwargs_json(env_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    kwargs = dict(env_kwargs or {})
    try:
        return json.loads(json.dumps(kwargs, sort_keys=True))
    except TypeError as exc:
        raise ValueError(f"env_kwargs must be JSON values (they are stored with the dataset): {exc}") from None


def dataset_name(env_id: str, n: int, seed: int = 0, env_kwargs: Mapping[str, Any] | None = None, *,
                 noise: float = DEFAULT_NOISE, only_successes: bool = True, device: str = "scripted") -> str:
    """``<task>-<n>-seed<seed>[-<kwargs hash>].zarr``, e.g. ``Reach-v0-20-seed0.zarr`` (the name
    :func:`ensure_demos` uses); a non-default noise, kept failures or another device are added to the name."""
    name = f"{env_id.split('/')[-1]}-{n}-seed{seed}"
    if device != "scripted":
        name = f"{env_id.split('/')[-1]}-{device}-{n}-seed{seed}"
    kwargs = _kwargs_json(env_kwargs)
    if kwargs:
        name += "-" + hashlib.sha1(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:8]
    if noise != DEFAULT_NOISE:
        name += f"-noise{noise:g}"
    if not only_successes:
        name += "-withfailures"
    return name + ".zarr"


@dataclass
class RecordStats:
    """What a recording produced."""

    path: Path
    env_id: str
    episodes: int
    attempts: int
    discarded: int
    transitions: int
    seconds: float
    bytes: int
    successes: int = 0
    returns: list[float] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.transitions / max(self.seconds, 1e-9)

    @property
    def bytes_per_episode(self) -> float:
        return self.bytes / max(self.episodes, 1)

    def summary(self) -> str:
        return (f"{self.episodes} demos of {self.env_id} ({self.transitions} transitions, {self.successes} "
                f"successful) -> {self.path}; {self.attempts} attempts, {self.discarded} failed and discarded; "
                f"{self.seconds:.1f} s "
                f"({self.steps_per_second:.0f} steps/s); {self.bytes / 1e6:.2f} MB "
                f"({self.bytes_per_episode / 1e3:.1f} kB per demo)")


def read_meta(path: str | Path) -> dict[str, Any] | None:
    """The ``dataset.json`` of a demo dataset, or None (e.g. a replay store saved by training)."""
    file = Path(path) / META_FILE
    if not file.is_file():
        return None
    meta = json.loads(file.read_text())
    if meta.get("format") != META_FORMAT:
        raise ValueError(f"{file} is not robot_rl demo metadata (format {meta.get('format')!r})")
    return meta


def is_complete(path: str | Path, n: int | None = None) -> bool:
    """True when ``path`` is a finished recording (with ``n`` episodes, if given)."""
    path = Path(path)
    try:
        meta = read_meta(path)
    except (ValueError, OSError):
        return False
    return (meta is not None and bool(meta.get("complete")) and (path / "commit.json").is_file()
            and (n is None or len(meta.get("episodes", [])) == n))


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _fsync_tree(path: Path) -> None:
    """Flushes every file and folder under ``path`` (so the rename that publishes it is durable)."""
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temp_prefix(out: Path) -> str:
    return f".{out.name}.tmp-"



def remove_stale_temps(out: str | Path) -> list[Path]:
    """Deletes temporary folders of ``out`` left by recordings on this host whose process is gone."""
    out = Path(out)
    removed = []
    if not out.parent.is_dir():
        return removed
    host = socket.gethostname()
    for tmp in out.parent.glob(_temp_prefix(out) + "*"):
        parts = tmp.name[len(_temp_prefix(out)):].rsplit("-", 2)  # <host>-<pid>-<token>
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue  # another host's (or a foreign) folder: leave it alone
        if int(parts[1]) != os.getpid() and not pid_alive(int(parts[1])):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def record_demos(env_id: str, n: int, out_path: str | Path, noise: float = DEFAULT_NOISE, seed: int = 0,
                 only_successes: bool = True, env_kwargs: Mapping[str, Any] | None = None, progress: bool = True,
                 *, device: str = "scripted", max_attempts: int | None = None,
                 overwrite: bool = False) -> RecordStats:
    """Records ``n`` episodes of ``device`` (the scripted expert) acting in ``env_id`` into a new dataset.

    With ``only_successes`` failed episodes are discarded (and counted) until ``n`` succeed or ``max_attempts``
    (default ``2 n + 10``) is reached, which raises RuntimeError. ``out_path`` must not exist unless
    ``overwrite``. The dataset appears at ``out_path`` only when complete.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    dev = make_device(device, noise)
    env_id = resolve_env_id(env_id)
    kwargs = _kwargs_json(env_kwargs)
    out = Path(out_path)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (choose another path or overwrite it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)
    tmp = out.with_name(f"{_temp_prefix(out)}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        stats = _record(dev, env_id, kwargs, n, tmp, noise, seed, only_successes, progress,
                        max_attempts if max_attempts is not None else 2 * n + 10)
        _fsync_tree(tmp)
        _publish(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    stats.path = out
    return stats


def _publish(tmp: Path, out: Path, overwrite: bool) -> None:
    old = None
    if overwrite and out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        os.replace(out, old)
    try:
        os.rename(tmp, out)
    except OSError as exc:
        if old is not None:
            os.replace(old, out)
        raise FileExistsError(f"{out} appeared while recording (another process?): {exc}") from exc
    dir_fd = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _progress(enabled: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                    console=Console(stderr=True), disable=not enabled)


def _copy_obs(obs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": np.array(obs["state"], np.float32)}
    if "pixels" in obs:
        out["pixels"] = {k: np.array(v) for k, v in obs["pixels"].items()}
    return out


def _record(dev: ScriptedDevice, env_id: str, kwargs: dict[str, Any], n: int, tmp: Path, noise: float,
            seed: int, only_successes: bool, progress: bool, max_attempts: int) -> RecordStats:
    from robot_rl import __version__ as robot_rl_version
    from robot_rl.envs.make import EnvConfig, make_env
    from robot_rl.replay.store import EpisodeWriter
    from robot_rl.spaces import ObsSpec, action_dim_of

    start = time.perf_counter()
    env = make_env(EnvConfig(id=env_id, kwargs=dict(kwargs)))
    try:
        dev.start(env)
        spec = ObsSpec.from_space(env.observation_space)
        writer = EpisodeWriter(tmp, spec, action_dim_of(env.action_space), partition=DEMO_PARTITION)
        meta: dict[str, Any] = {
            "format": META_FORMAT, "version": META_VERSION, "env_id": env_id, "env_kwargs": kwargs,
            "device": dev.name, "noise": noise, "seed": seed, "only_successes": only_successes,
            "partition": DEMO_PARTITION, "fps": float(env.metadata.get("render_fps") or 20),
            "versions": _versions(robot_rl_version), "complete": False,
            "attempts": 0, "discarded": 0, "episodes": []}
        attempts = discarded = transitions = 0
        with _progress(progress) as bar:
            task = bar.add_task(f"recording {env_id.split('/')[-1]} ({dev.name})", total=n, info="")
            while len(meta["episodes"]) < n:
                if attempts >= max_attempts:
                    raise RuntimeError(
                        f"{env_id}: only {len(meta['episodes'])} of {n} demos succeeded in {attempts} attempts "
                        f"(noise {noise}); lower the noise or keep failures")
                reset_seed = episode_seed(seed, attempts)
                attempts += 1
                obs, info = env.reset(seed=reset_seed)
                observations, actions, rewards, terminated, truncated = [_copy_obs(obs)], [], [], [], []
                while True:
                    action = dev.action(env, obs)
                    obs, reward, term, trunc, info = env.step(action)
                    observations.append(_copy_obs(obs))
                    actions.append(action)
                    rewards.append(reward)
                    terminated.append(term)
                    truncated.append(trunc)
                    if term or trunc:
                        break
                success = bool(info.get("is_success", False))
                if only_successes and not success:
                    discarded += 1
                else:
                    ep = len(meta["episodes"])
                    writer.append(observations, np.stack(actions).astype(np.float32),
                                  np.asarray(rewards, np.float32), np.asarray(terminated), np.asarray(truncated),
                                  source="demo", episode_id=ep)
                    transitions += len(actions)
                    meta["episodes"].append({"episode_id": ep, "reset_seed": reset_seed, "length": len(actions),
                                             "return": float(np.sum(rewards)), "success": success})
                    bar.advance(task)
                meta.update(attempts=attempts, discarded=discarded)
                _write_meta(tmp, meta)
                bar.update(task, info=f"{attempts} attempts, {discarded} discarded")
        meta["complete"] = True
        _write_meta(tmp, meta)
    finally:
        env.close()
    return RecordStats(path=tmp, env_id=env_id, episodes=n, attempts=attempts, discarded=discarded,
                       transitions=transitions, seconds=time.perf_counter() - start, bytes=_dir_bytes(tmp),
                       successes=sum(e["success"] for e in meta["episodes"]),
                       returns=[e["return"] for e in meta["episodes"]])


def _versions(robot_rl_version: str) -> dict[str, str]:
    import gymnasium
    import mujoco

    return {"robot_rl": robot_rl_version, "mujoco": mujoco.__version__, "gymnasium": gymnasium.__version__}


def _write_meta(path: Path, meta: Mapping[str, Any]) -> None:
    atomic_write(path / META_FILE, lambda f: f.write_text(json.dumps(meta, indent=1)))


def ensure_demos(env_id: str, n: int, seed: int = 0, root: str | Path = "demos",
                 env_kwargs: Mapping[str, Any] | None = None, progress: bool = False) -> Path:
    """``<root>/<task>-<n>-seed<seed>[-<kwargs hash>].zarr``, recorded with the scripted expert on first use.

    Later calls return the existing dataset without touching it. A finished dataset is only ever published by
    an atomic rename, so what sits at the path is complete; anything else there is an error to resolve by hand.
    """
    env_id = resolve_env_id(env_id)
    path = Path(root) / dataset_name(env_id, n, seed, env_kwargs)
    if path.exists():
        if is_complete(path, n):
            return path
        raise ValueError(f"{path} exists but is not a complete {n}-episode demo dataset; delete it to regenerate")
    try:
        record_demos(env_id, n, path, noise=DEFAULT_NOISE, seed=seed, env_kwargs=env_kwargs, progress=progress)
    except FileExistsError:
        if not is_complete(path, n):  # another process published first: use it when it is complete
            raise
    return path
