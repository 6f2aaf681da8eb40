"""Ray transport: a local Ray cluster with token authentication, the gateway's checks, and ``robot-rl train`` with
``runtime.transport: ray`` (two remote actors; one killed and replaced)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save as save_np
from safetensors.torch import load as load_torch

from robot_rl.agents.sac import SACAgent
from robot_rl.config import replace, save_yaml, to_dict
from robot_rl.replay.rows import BlockBuilder
from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.runtime.transport import shm
from robot_rl.runtime.transport.names import actor_dir, board_name, run_key
from robot_rl.runtime.transport.spool import spool_file
from robot_rl.spaces import ObsSpec

from .test_processes import tiny, wait_for

ray = pytest.importorskip("ray")
from robot_rl.runtime.placement.ray_gateway import Gateway, require_token_auth  # noqa: E402

CLI = [sys.executable, "-m", "robot_rl.cli"]
SPEC = ObsSpec(3)  # Pendulum-v1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster with token authentication (a random token), two 'robot' slots plus one for a
    replacement; shut down (only this cluster) at the end. Actors keep their node-local folders in ACTOR_DIR."""
    old = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "MUJOCO_GL", "ROBOT_RL_ACTOR_DIR")}
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16), MUJOCO_GL="egl",
                      ROBOT_RL_ACTOR_DIR=str(tmp_path_factory.mktemp("actor_nodes")))
    require_token_auth()
    ray.init(address="local", num_cpus=2, resources={"robot": 3}, include_dashboard=False, _node_ip_address="127.0.0.1",
             logging_level="WARNING")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def chunk(n: int = 5, **override) -> dict[str, np.ndarray]:
    builder = BlockBuilder(SPEC, 1, 16)
    for t in range(n):
        builder.add(0, {"state": np.full(3, t, np.float32)}, np.zeros(1, np.float32), -1.0, False, False,
                    {"state": np.full(3, t + 1, np.float32)})
    out = {k: v.copy() for k, v in builder.take().items()}
    out.update(override)
    return out


def unlink_rings(run: Path) -> None:
    for path in actor_dir(run).glob("*.json"):
        shm.unlink_shm(json.loads(path.read_text())["ring"])


def test_gateway_spools_then_rings_chunks_and_rejects_malformed_ones(tmp_path):
    cfg = tiny(tmp_path, "gw")
    run = tmp_path / "gw"
    gateway = Gateway(json.dumps(to_dict(cfg)), str(run))  # JSON is YAML
    try:
        assert gateway.join("actor0-0-1-abc", 0, 1) == 0
        info = json.loads((actor_dir(run) / "actor0-0-1-abc.json").read_text())
        assert info["pid"] == os.getpid() and info["spool"]
        good = chunk()
        assert gateway.push("actor0-0-1-abc", 0, save_np(good)) == 1
        assert spool_file(run / "spool" / "actor0-0-1-abc", 0).is_file()  # spooled before the ring
        ring = shm.ChunkRing(info["ring"], gateway.specs)
        seq, views = ring.peek()
        assert seq == 0 and np.array_equal(views["state"], good["state"])
        assert gateway.push("actor0-0-1-abc", 0, save_np(good)) == 1  # a duplicate is ignored
        assert gateway.push("actor0-0-1-abc", 5, save_np(good)) == 1  # a gap is refused: resend from 1
        with pytest.raises(ValueError, match=r"chunk 1 from actor0-0-1-abc rejected: block array 'state'.*float64"):
            gateway.push("actor0-0-1-abc", 1, save_np(chunk(state=good["state"].astype(np.float64))))
        with pytest.raises(ValueError, match=r"block array 'action': expected \(6, 1\)"):
            gateway.push("actor0-0-1-abc", 1, save_np(chunk(action=np.zeros((6, 2), np.float32))))
        with pytest.raises(ValueError, match="rejected"):  # not safetensors (e.g. a pickle): never unpickled
            gateway.push("actor0-0-1-abc", 1, b"\x80\x04\x95" + b"\0" * 64)
        with pytest.raises(ValueError, match="lacks array"):
            gateway.push("actor0-0-1-abc", 1, save_np({"state": good["state"]}))
        assert not spool_file(run / "spool" / "actor0-0-1-abc", 1).exists()
        with pytest.raises(ValueError, match="plain name"):
            gateway.join("../../etc", 0, 1)
        with pytest.raises(ValueError, match="unknown actor"):
            gateway.push("nobody", 0, save_np(good))
        ring.close()
        # Weights: what the learner publishes comes back as safetensors bytes, only when newer.
        template = SACAgent(SPEC, 1, cfg.agent).policy_state()
        board = shm.WeightBoard(board_name(run), template, create=True)
        board.publish(template, 3)
        board.beat(updates=7, env_steps=0)
        reply = gateway.sync("actor0-0-1-abc", 0, [0] * 9)
        assert reply["version"] == 3 and reply["updates"] == 7 and reply["learner_age_s"] < 5
        weights = load_torch(reply["weights"])
        assert all(torch.equal(weights[k], template[k]) for k in template)
        assert gateway.sync("actor0-0-1-abc", 3, [0] * 9)["weights"] is None
        board.close(unlink=True)
        gateway.leave("actor0-0-1-abc")
        with pytest.raises(ValueError, match="retired"):
            gateway.sync("actor0-0-1-abc", 0, [0] * 9)
    finally:
        gateway.close()
        unlink_rings(run)


@pytest.mark.slow
def test_token_auth_is_on_and_a_bad_chunk_through_ray_is_rejected(cluster, tmp_path):
    env = {**os.environ, "RAY_AUTH_TOKEN": "not-the-token", "RAY_gcs_server_port_wait_time_s": "2"}
    probe = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address={cluster!r}); print('JOINED')"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode != 0 and "JOINED" not in probe.stdout, "a wrong token joined the cluster"
    assert "InvalidAuthToken" in probe.stderr, probe.stderr[-2000:]
    cfg = tiny(tmp_path, "gwray")
    gateway = ray.remote(Gateway).options(num_cpus=0).remote(json.dumps(to_dict(cfg)), str(tmp_path / "gwray"))
    try:
        assert ray.get(gateway.join.remote("a-1", 0, 1)) == 0
        assert ray.get(gateway.push.remote("a-1", 0, save_np(chunk()))) == 1
        with pytest.raises(ValueError, match="block array 'reward'"):
            ray.get(gateway.push.remote("a-1", 1, save_np(chunk(reward=np.zeros(6, np.int32)))))
        assert ray.get(gateway.status.remote()) == {"a-1": {"acked": 1, "gone": False}}
    finally:
        ray.kill(gateway)
        unlink_rings(tmp_path / "gwray")


@pytest.mark.slow
def test_bridge_delivers_from_ring_and_local_spool_and_resends_after_a_refused_gap(cluster, tmp_path):
    from types import SimpleNamespace

    from safetensors.numpy import load_file, save_file

    from robot_rl.replay.rows import row_specs
    from robot_rl.runtime.placement.ray_bridge import Bridge
    from robot_rl.runtime.transport.names import ring_name

    class LostPushes(Bridge):  # as after a reconnect that lost pushes 0 and 1: the gateway refuses 2 (a gap)
        def start(self) -> None:
            super().start()
            self.sent = 2

    cfg = tiny(tmp_path, "bridge")
    learner_run, local = tmp_path / "bridge", tmp_path / "robot"
    gateway = ray.remote(Gateway).options(num_cpus=0).remote(json.dumps(to_dict(cfg)), str(learner_run))
    ring = shm.ChunkRing(ring_name(local, "a-1"), row_specs(SPEC, 1), 4, 32, create=True)
    board = shm.WeightBoard(board_name(local), SACAgent(SPEC, 1, cfg.agent).policy_state(), create=True)
    chunks = [chunk(n=2 + k) for k in range(5)]
    (local / "spool" / "a-1").mkdir(parents=True)
    for seq in range(5):  # as the actor does: every chunk in the local spool; 0-2 overflowed the ring
        save_file(chunks[seq], str(spool_file(local / "spool" / "a-1", seq)))
    for seq in (3, 4):
        assert ring.put(chunks[seq], seq)
    actor = SimpleNamespace(uid="a-1", outbox=SimpleNamespace(ring=ring, seq=5), run_dir=local, index=0, n=1,
                            rt=SimpleNamespace(heartbeat_timeout=10.0))
    bridge = LostPushes(gateway, actor, board)
    try:
        bridge.start()
        wait_for(lambda: bridge.acked == 5, 30, "every chunk acked")
        time.sleep(1.2)  # the local spool is trimmed up to the ack about once a second
        bridge.finish()
        assert bridge.error is None, bridge.error
        for seq, sent in enumerate(chunks):
            got = load_file(str(spool_file(learner_run / "spool" / "a-1", seq)))
            assert all(np.array_equal(got[k], sent[k]) for k in sent), seq
        assert not list((local / "spool" / "a-1").iterdir())
        assert ring.pending() == 0  # the bridge consumed the ring like a learner
        assert ray.get(gateway.status.remote()) == {"a-1": {"acked": 5, "gone": True}}  # it said goodbye
        assert board.version == 0  # no learner yet: nothing to mirror
    finally:
        ray.kill(gateway)
        ring.close(unlink=True)
        board.close(unlink=True)
        unlink_rings(learner_run)


def train_cli(cfg, tmp_path: Path) -> subprocess.Popen:
    """``robot-rl train`` in the background; its output goes to files (a full pipe would block it)."""
    path = tmp_path / f"{cfg.name}.yaml"
    save_yaml(cfg, path)
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        return subprocess.Popen([*CLI, "train", str(path)], stdout=out, stderr=err, text=True)


def finish(proc: subprocess.Popen, tmp_path: Path, timeout: float) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, err[-3000:]
    return err


def ray_cfg(tmp_path: Path, name: str, address: str, num_actors: int = 2, **runtime):
    # max_update_lag 100: the actors wait for the learner's updates (a slow learner start on a loaded 2-core machine
    # let them finish all 800 steps on the first weights), so they must act with weights published while learning.
    # heartbeat_timeout: the default 10 s (with 3 s, two CPU hogs on 2 cores delayed the gateway's answers past it:
    # scripts/stress_runtime.sh). A killed actor is seen at once through Ray, not through the heartbeat.
    runtime = {"max_update_lag": 100, **runtime}
    cfg = tiny(tmp_path, name, transport="ray", ray_address=address, num_actors=num_actors, heartbeat_timeout=10.0,
               **runtime)
    return replace(cfg, {"total_env_steps": 800})


def check_run(run: Path, total: int) -> dict:
    counters = json.loads((latest_checkpoint(run) / "counters.json").read_text())
    assert counters["env_steps"] >= total
    replay = load_buffer(latest_checkpoint(run) / "replay.zarr")
    online = replay.partitions["online"]
    versions = online.arrays["policy_version"][: online.size][online.arrays["valid"][: online.size]]
    assert versions.max() > 2, "the remote actors never acted with weights published during learning"
    assert not list(actor_dir(run).glob("*.json")), "rings left registered"
    assert not [p for p in Path("/dev/shm").glob(f"{board_name(run)[:16]}*")]
    # The remote actors removed their node-local folder (config, spool, ring and board names derive from it).
    assert not (Path(os.environ["ROBOT_RL_ACTOR_DIR"]) / run_key(run)).exists()
    return counters


# Generous limits: ~30 s here unloaded, but with two CPU hogs beside Ray's own processes on 2 cores a run took
# 90 s just to start its learner (scripts/stress_runtime.sh).
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ray_run_with_two_remote_actors_completes(cluster, tmp_path):
    cfg = ray_cfg(tmp_path, "ray2", cluster)
    finish(train_cli(cfg, tmp_path), tmp_path, timeout=600)
    counters = check_run(tmp_path / "ray2", cfg.total_env_steps)
    uids = sorted(counters["ingested"])
    assert len(uids) == 2 and uids[0].startswith("actor0-") and uids[1].startswith("actor1-"), uids
    assert all(counters["ingested"][u] > 0 for u in uids)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ray_remote_actor_killed_then_a_replacement_joins(cluster, tmp_path):
    # One robot-like actor: the run can only complete through its replacement, however long a Ray actor takes to
    # start (with two CPU hogs on 2 cores, longer than a second actor took to finish the run alone).
    cfg = ray_cfg(tmp_path, "rayk", cluster, num_actors=1, control_hz=50.0)
    cfg = replace(cfg, {"total_env_steps": 1000})
    proc = train_cli(cfg, tmp_path)
    run = tmp_path / "rayk"
    try:
        wait_for(lambda: (run / "status.json").is_file()
                 and json.loads((run / "status.json").read_text())["env_steps"] > 200, 600, "some progress")
        first = json.loads(next(actor_dir(run).glob("actor0-*.json")).read_text())["uid"]
        os.kill(int(first.split("-")[2]), signal.SIGKILL)  # uid = actor<index>-<incarnation>-<pid>-<random>
    except BaseException:
        proc.kill()
        status = (run / "status.json").read_text() if (run / "status.json").is_file() else "no status.json"
        proc.wait(timeout=30)
        raise AssertionError(f"status: {status}\nstderr: {(tmp_path / 'stderr.txt').read_text()[-3000:]}") from None
    err = finish(proc, tmp_path, timeout=400)
    assert "starting a replacement" in err
    counters = check_run(run, cfg.total_env_steps)
    assert first in counters["ingested"] and len(counters["ingested"]) == 2, counters["ingested"]
    replacement = [u for u in counters["ingested"] if u.startswith("actor0-1-")]
    assert replacement and counters["ingested"][replacement[0]] > 0
