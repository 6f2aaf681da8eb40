"""The pixel learner's options side by side on this machine: learner updates/s of the ``pickcube_pixels_end_to_end``
agent (2 x 64² cameras, batch 128, 2 critics, UTD 1) with each way of making a pixel update cheaper, timed in
interleaved rounds in one process (a busy machine slows every option alike).

    MUJOCO_GL=egl python benchmarks/pixel_options.py [--seconds 48] [--rounds 8] [--threads 2] [--out FILE]

Options: the conv encoder trained by the critics in float32 (the bundled recipe); the same under bfloat16 autocast
(AMX or AVX-512 BF16 kernels where the CPU has them); the conv encoder frozen (loaded from a weights file, not
trained: no conv backward); frozen and bfloat16; a smaller strided stem (16 channels, 3 stride-2 layers) trained, in
float32 and in bfloat16; the small stem with its conv layers frozen after pre-training on the demos
(``encoder.pretrain_steps``; its projection still trained) in bfloat16. Each row also gives the share of the update
spent in convolutions (torch profiler).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import Table, write_result
from pixel_speed import batch, pixel_spec

from robot_rl.agents import SACAgent
from robot_rl.agents.config import SACConfig


def options(base: SACConfig, weights: str) -> dict[str, SACConfig]:
    enc = base.encoder
    frozen = dataclasses.replace(enc, pretrained_path=weights, freeze_pretrained=True)
    small = dataclasses.replace(enc, conv_channels=(16, 16, 16), conv_strides=(2, 2, 2))
    return {
        "trained conv, float32 (bundled)": base,
        "trained conv, bf16 autocast": dataclasses.replace(base, bf16=True),
        "frozen conv, float32": dataclasses.replace(base, encoder=frozen),
        "frozen conv, bf16 autocast": dataclasses.replace(base, encoder=frozen, bf16=True),
        "small stem (16 ch, 3 x stride 2), float32": dataclasses.replace(base, encoder=small),
        "small stem, bf16 autocast": dataclasses.replace(base, encoder=small, bf16=True),
        "small stem, conv layers frozen after pre-training, bf16 autocast":
            dataclasses.replace(base, encoder=dataclasses.replace(small, pretrain_steps=1), bf16=True),
    }


def conv_share(agent: SACAgent, batches: list[dict]) -> float:
    return conv_share_of(lambda: [agent.update(b) for b in batches])


def conv_share_of(step) -> float:
    """The share of ``step()``'s CPU time spent in convolution ops (torch profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    return sum(e.self_cpu_time_total for e in events if "conv" in e.key.lower()) / total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=48.0, help="timed seconds per option, over all rounds")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=2, help="torch threads of the learner")
    p.add_argument("--out", default=None, help="result file (default: benchmarks/results/pixel_options.json)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from robot_rl.cli import resolve_config
    from robot_rl.config import parse
    from robot_rl.training.config import TrainConfig

    run = parse(TrainConfig, resolve_config("pickcube_pixels_end_to_end"), [])
    kwargs = dict(run.env.kwargs)
    size = kwargs.pop("image_size")
    spec, base = pixel_spec(size, **kwargs), run.agent
    rng = np.random.default_rng(0)
    batches = [batch(spec, base.batch_size, rng) for _ in range(3)]
    with tempfile.TemporaryDirectory() as tmp:
        weights = str(Path(tmp) / "encoder.safetensors")
        SACAgent(spec, 4, base).encoder.save_pretrained(weights)
        agents = {name: SACAgent(spec, 4, cfg) for name, cfg in options(base, weights).items()}
    for agent in agents.values():
        if agent.encoder_pretraining is not None:  # timed as after its pre-training (speed: any weights)
            agent.encoder_pretraining.skip()
    rates: dict[str, list[float]] = {name: [] for name in agents}
    for agent in agents.values():  # warm-up: kernels chosen, buffers allocated
        for b in batches:
            agent.update(b)
    slot = args.seconds / args.rounds
    for r in range(args.rounds):
        for name, agent in agents.items():
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < slot:
                agent.update(batches[n % len(batches)])
                n += 1
            rates[name].append(n / (time.perf_counter() - t0))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{rates[k][-1]:.1f}" for k in agents), flush=True)
    shares = {name: conv_share(agent, batches) for name, agent in agents.items()}
    first = next(iter(agents))
    table = Table(f"Learner updates/s of the pickcube_pixels_end_to_end agent (2 x {size}², batch {base.batch_size}, "
                  f"{base.num_critics} critics, UTD {base.utd}), {args.threads} torch threads; {args.rounds} "
                  f"interleaved rounds of {slot:.1f} s per option",
                  ["option", "updates/s (median)", "vs bundled (median of per-round ratios)", "convolutions' share"])
    for name in agents:
        ratio = np.median(np.array(rates[name]) / np.array(rates[first]))
        table.add(name, f"{np.median(rates[name]):.1f}", f"{ratio:.2f}x", f"{100 * shares[name]:.0f} %")
    figures = {"image_size": size, "batch": base.batch_size, "num_critics": base.num_critics, "threads": args.threads,
               "rates": rates, "conv_share": shares}
    print(f"results: {write_result('pixel_options', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
