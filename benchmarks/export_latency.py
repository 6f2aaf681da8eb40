"""Latency of an exported policy on the CPU: one observation -> one action, per call (p50 / p99), for the training
stack's ``agent.act`` (torch), the exported ONNX graph under onnxruntime (robot_rl.deploy.runner, numpy only) and
TorchScript, with 1 thread.

    python benchmarks/export_latency.py [--calls 2000]

Policies: SAC's actor on a PickCube-sized state (default network 256x256) and on two 64x64 cameras + state (the
default conv encoder). Weights are as initialised: latency does not depend on their values.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import Table, write_result

from robot_rl.agents.config import SACConfig
from robot_rl.agents.sac import SACAgent
from robot_rl.deploy.export import export_policy, observation_arrays
from robot_rl.deploy.runner import OnnxPolicy
from robot_rl.spaces import ObsSpec

POLICIES = {"state (18-d)": ObsSpec(18), "pixels (2x64x64 + 18-d)": ObsSpec(18, {"front": (64, 64, 3),
                                                                                 "wrist": (64, 64, 3)})}


def observation(spec: ObsSpec, n: int, rng: np.random.Generator) -> dict:
    obs: dict = {"state": rng.normal(size=(n, spec.state_dim)).astype(np.float32)}
    if spec.cameras:
        obs["pixels"] = {c: rng.integers(0, 255, (n, *s), dtype=np.uint8) for c, s in spec.cameras.items()}
    return obs


def timed(fn, calls: int) -> tuple[float, float]:
    for _ in range(50):
        fn()
    times = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    return float(np.percentile(times, 50) * 1e6), float(np.percentile(times, 99) * 1e6)


def measure(name: str, spec: ObsSpec, calls: int, rng: np.random.Generator) -> dict:
    """p50/p99 latency (us) of one policy through torch, onnxruntime and TorchScript."""
    agent = SACAgent(spec, 4, SACConfig(num_critics=2))
    one = {k: (v[0] if k != "pixels" else {c: f[0] for c, f in v.items()})
           for k, v in observation(spec, 1, rng).items()}
    with tempfile.TemporaryDirectory() as folder:
        export_policy(agent, "onnx", Path(folder) / "onnx", observation(spec, 64, rng))
        export_policy(agent, "torchscript", Path(folder) / "ts", observation(spec, 64, rng))
        onnx = OnnxPolicy(Path(folder) / "onnx", threads=1)
        script = torch.jit.load(str(Path(folder) / "ts" / "policy.pt"))
    inputs = [torch.from_numpy(a[None]) for a in observation_arrays(one, spec)]

    def run_script() -> None:
        with torch.no_grad():
            script(*inputs)

    return {"policy": name, "torch_act": timed(lambda: agent.act(one, deterministic=True), calls),
            "onnxruntime": timed(lambda: onnx.act(one), calls), "torchscript": timed(run_script, calls)}


def tables(figures: dict) -> list[Table]:
    """The result's table: p50 / p99 per policy and runtime, and onnxruntime's speed-up over ``agent.act``."""
    table = Table(f"One observation -> one action on the CPU, {figures['threads']} thread, batch {figures['batch']}",
                  ["policy", "torch agent.act p50 / p99", "onnxruntime", "TorchScript", "onnxruntime vs agent.act"],
                  echo=False)
    for r in figures["rows"]:
        cells = [f"{r[k][0]:.0f} / {r[k][1]:.0f} µs" for k in ("torch_act", "onnxruntime", "torchscript")]
        table.add(r["policy"], *cells, f"{r['torch_act'][0] / r['onnxruntime'][0]:.1f}x")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    rows = [measure(name, spec, args.calls, rng) for name, spec in POLICIES.items()]
    print(f"{'policy':<26} {'torch act p50/p99 us':>22} {'onnxruntime':>18} {'torchscript':>18} {'onnx speed-up':>14}")
    for r in rows:
        cells = " ".join(f"{r[k][0]:>9.0f}/{r[k][1]:<8.0f}" for k in ("torch_act", "onnxruntime", "torchscript"))
        print(f"{r['policy']:<26} {cells} {r['torch_act'][0] / r['onnxruntime'][0]:>13.1f}x")
    figures = {"threads": 1, "batch": 1, "rows": rows}
    path = write_result("export_latency", figures, args.out, tables=tables(figures))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
