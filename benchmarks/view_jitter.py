"""Actor period jitter with the live operator view on and off, side by side in one run.

    MUJOCO_GL=egl python benchmarks/view_jitter.py [--block-seconds 10] [--blocks 12] [--image-size 64 0] [--out FILE]

The real actor runs its own paced loop (``Actor.run``, ``runtime.control_hz 20``, the policy acting, no learner,
``max_update_lag 0`` as on a robot) on PickCube with two cameras of ``--image-size`` pixels, the scripted human
as its teleop device. The run alternates blocks of ``--block-seconds`` with the view off and on (off first, on
second, ...), so both conditions share the machine's load over the run. With the view on, every control period
goes to the :class:`~robot_rl.view.live.OperatorView` (cameras, actions, control, reward, time, progress), which
logs it with rerun on its own thread (``view.batch_s`` 0.25 s of frames at a time) and saves every episode as a
.rrd file (``view.live: none``: this machine has no display; a viewer's gRPC stream is sent by rerun's own threads).
A period's jitter is the actor's own figure: how late the loop started the period against its schedule; the p99's
95 % interval is a percentile bootstrap over the periods. Also reported: the view's frames logged (the warm-up's
included) and dropped, and the CPU time of the view's thread.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import Table, write_result

from robot_rl.config import from_dict
from robot_rl.runtime.actor import Actor
from robot_rl.training.config import TrainConfig
from robot_rl.training.stats import bootstrap_ci

HZ = 20.0


def thread_cpu_s(native_id: int) -> float:
    """User + system CPU seconds of one thread of this process (Linux)."""
    stat = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / 100.0  # utime, stime in clock ticks (100 Hz)


def measure(image_size: int, block_s: float, blocks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = from_dict(TrainConfig, {
            "env": {"id": "robot_rl/PickCube-v0", "kwargs": {"image_size": image_size} if image_size else {}},
            "random_steps": 0, "learning_starts": 10**9, "total_env_steps": 10**9,
            "agent": {"num_critics": 2, "hidden_dims": [256, 256]},
            "runtime": {"control_hz": HZ, "max_update_lag": 0, "spool": False},
            "teleop": {"device": "scripted"},
            "view": {"enabled": True, "live": "none", "save_dir": str(Path(tmp) / "view")}})
        actor = Actor(cfg, tmp)
        view = actor.view
        actor.version = 1  # act with the (initial) policy as if the learner had published it
        for _ in range(20):  # first-call costs out of the timing
            actor.step()
        periods, total = int(block_s * HZ), 2 * blocks * int(block_s * HZ)
        samples: dict[str, list[float]] = {"off": [], "on": []}
        cpu = {"off": 0.0, "on": 0.0}
        state: dict[str, Any] = {"n": 0}
        step = actor.step

        def switch(cond: str) -> None:
            now_cpu = thread_cpu_s(view._thread.native_id)
            cpu[state["cond"]] += now_cpu - state["cpu0"]
            state["cpu0"], state["cond"] = now_cpu, cond
            actor.view = view if cond == "on" else None

        def tagged_step() -> bool:
            """The actor's step, after filing the lateness the loop measured for this period (appended just before
            the call) under the condition in force; switches the view at block boundaries."""
            if state["n"]:
                samples[state["cond"]].append(actor._jitter[-1])
            if state["n"] == total:  # the end: the view back in place for the actor's close()
                switch("on")
                state["done"] = True
                return False
            if state["n"] % periods == 0:
                switch("on" if (state["n"] // periods) % 2 else "off")
            state["n"] += 1
            return step()

        actor.step = tagged_step  # type: ignore[method-assign]
        actor.should_stop = lambda: bool(state.get("done"))  # type: ignore[method-assign]
        state.update(cond="off", cpu0=thread_cpu_s(view._thread.native_id))
        actor.view = None
        t0 = time.perf_counter()
        actor.run()  # the actor's own paced loop; it closes the actor (and the view) at the end
        wall = time.perf_counter() - t0
        actor.outbox.ring.close(unlink=True)
        files = sorted((Path(tmp) / "view").glob("*.rrd"))
        out: dict[str, Any] = {"image_size": image_size, "wall_s": wall, "frames_shown": view.shown,
                               "frames_dropped": view.dropped, "recordings": len(files),
                               "recording_mb": sum(f.stat().st_size for f in files) / 2**20}
        for cond, values in samples.items():
            late = np.abs(np.asarray(values)) * 1e3
            _, low, high = bootstrap_ci(late, stat=lambda v: np.percentile(v, 99), reps=1000)
            out[cond] = {"n": int(late.size), "p50_ms": float(np.percentile(late, 50)),
                         "p90_ms": float(np.percentile(late, 90)), "p99_ms": float(np.percentile(late, 99)),
                         "p99_ci_ms": [low, high], "max_ms": float(late.max()), "view_thread_cpu_s": cpu[cond],
                         "seconds": late.size / HZ}
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block-seconds", type=float, default=10.0)
    parser.add_argument("--blocks", type=int, default=12, help="blocks per condition")
    parser.add_argument("--image-size", type=int, nargs="+", default=[64, 0],
                        help="camera side in pixels (0: state only, no cameras in the view)")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/view_jitter.json)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    table = Table(f"Actor period jitter at {HZ:g} Hz with the operator view off and on, alternating blocks of "
                  f"{args.block_seconds:g} s ({args.blocks} per condition) in one run; PickCube, policy acting, "
                  "scripted human", ["env", "view", "periods", "jitter p50", "p90", "p99 (95 % CI)", "max",
                                     "view thread CPU", "on / off p99"])
    figures: dict[str, Any] = {"rows": []}
    for size in args.image_size:
        r = measure(size, args.block_seconds, args.blocks)
        figures["rows"].append(r)
        name = f"2 cameras {size}x{size}" if size else "state only"
        ratio = r["on"]["p99_ms"] / r["off"]["p99_ms"]
        for cond in ("off", "on"):
            c = r[cond]
            share = f"{100 * c['view_thread_cpu_s'] / c['seconds']:.1f} %" if cond == "on" else "–"
            low, high = c["p99_ci_ms"]
            table.add(name, cond, c["n"], f"{c['p50_ms']:.2f} ms", f"{c['p90_ms']:.2f} ms",
                      f"{c['p99_ms']:.2f} ms ({low:.2f}–{high:.2f})", f"{c['max_ms']:.1f} ms", share,
                      f"{ratio:.2f}" if cond == "on" else "")
        print(f"{name}: {r['frames_shown']} frames logged, {r['frames_dropped']} dropped, {r['recordings']} "
              f"recordings, {r['recording_mb']:.1f} MB", flush=True)
    table.notes = ("jitter: how late the actor's loop started a control period against its schedule (its own "
                   "measure, runtime.control_hz 20). view thread CPU: the view's logging thread's CPU time as a share "
                   "of the blocks' wall time. " + "; ".join(
                       f"{'2 cameras ' + str(r['image_size']) + ' px' if r['image_size'] else 'state only'}: "
                       f"{r['frames_shown']} frames logged, {r['frames_dropped']} dropped, {r['recordings']} "
                       f"recordings of {r['recording_mb']:.1f} MB" for r in figures["rows"]))
    print(f"results: {write_result('view_jitter', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
