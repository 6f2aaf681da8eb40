"""Pixel path speed on this machine: learner updates/s and actor inference time for pixel PickCube (front + wrist
cameras), our pixel path vs a naive one, and a profile of one learner update.

    MUJOCO_GL=egl python benchmarks/pixel_speed.py [--sizes 64 128] [--batch 256] [--seconds 6] [--profile] [--bundled]
                                                   [--out RESULT.json]

Ours: uint8 NHWC frames go to the learner as they are stored; random-shift augmentation is one row gather of whole
uint8 pixels (replicate padding as a clamped index), then conversion to float is one op on a channels-last view.
Naive (for comparison only, built here by swapping that function): frames made NCHW-contiguous float first,
augmentation one image at a time.
Actor inference: one observation, one torch thread (what the actor process uses), median and p99 of 300 calls.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from common import Table, write_result

from robot_rl.agents import SACAgent, SACConfig, encoders
from robot_rl.agents.config import EncoderConfig
from robot_rl.replay.rows import SOURCE_CODE
from robot_rl.spaces import ObsSpec


def pixel_spec(size: int, **kwargs: object) -> ObsSpec:
    import gymnasium as gym

    import robot_rl_sim  # noqa: F401

    env = gym.make("robot_rl/PickCube-v0", **{"image_size": size, **kwargs})
    spec = ObsSpec.from_space(env.observation_space)
    env.close()
    return spec


def random_obs(spec: ObsSpec, lead: tuple[int, ...], rng: np.random.Generator) -> dict:
    return {"state": rng.standard_normal((*lead, spec.state_dim)).astype(np.float32),
            "pixels": {c: rng.integers(0, 256, (*lead, *shape), dtype=np.uint8) for c, shape in spec.cameras.items()}}


def batch(spec: ObsSpec, b: int, rng: np.random.Generator) -> dict:
    return {"obs": random_obs(spec, (1, b), rng), "next_obs": random_obs(spec, (1, b), rng),
            "action": rng.uniform(-1, 1, (1, b, 4)).astype(np.float32),
            "reward": rng.standard_normal((1, b)).astype(np.float32), "terminated": np.zeros((1, b), bool),
            # half the rows demos, as the 50/50 mix gives (the BC term reads these)
            "source": np.repeat([SOURCE_CODE["online"], SOURCE_CODE["demo"]], [b - b // 2, b // 2])[None],
            "intervened": np.zeros((1, b), bool)}


def naive_to_float(frames: torch.Tensor) -> torch.Tensor:
    x = frames.reshape(-1, *frames.shape[-3:]).float().div(255.0).sub(0.5)
    return x.permute(0, 3, 1, 2).contiguous()


def naive_shift(images: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    out = []
    for img in images:
        p = F.pad(img[None], (pad, pad, pad, pad), mode="replicate")
        dx, dy = np.random.randint(0, 2 * pad + 1, 2)
        out.append(p[:, :, dy:dy + img.shape[1], dx:dx + img.shape[2]])
    return torch.cat(out)


def naive_input(frames: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Frames made NCHW float first, then shifted one image at a time."""
    x = naive_to_float(frames)
    return naive_shift(x, pad) if pad else x


def updates_per_s(agent: SACAgent, batches: list[dict], seconds: float) -> float:
    for b in batches[:2]:
        agent.update(b)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        agent.update(batches[n % len(batches)])
        n += 1
    return n / (time.perf_counter() - t0)


def inference_ms(agent: SACAgent, obs: dict) -> tuple[float, float]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for _ in range(20):
        agent.act(obs)
    times = []
    for _ in range(300):
        t0 = time.perf_counter()
        agent.act(obs)
        times.append(time.perf_counter() - t0)
    torch.set_num_threads(threads)
    return float(np.median(times) * 1e3), float(np.percentile(times, 99) * 1e3)


def profile_table(prof, size: int, rows: int = 12) -> Table:
    """The profiled update's top ops by self CPU time, as a share of all ops' self CPU time."""
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in ops) or 1.0
    table = Table(f"Where a 2x{size}² learner update's time goes (torch profiler, self CPU time)",
                  ["op", "self CPU share", "self CPU ms", "calls"], echo=False)
    for e in ops[:rows]:
        table.add(e.key, f"{100 * e.self_cpu_time_total / total:.0f} %", f"{e.self_cpu_time_total / 1e3:.1f}", e.count)
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--profile", action="store_true", help="print the top ops of a profiled update (first size)")
    p.add_argument("--bundled", action="store_true",
                   help="also the agent of robot_rl/configs/pickcube_pixels_end_to_end.yaml (its critics, batch, "
                        "image size)")
    p.add_argument("--out", default=None, help="result file (default: benchmarks/results/pixel_speed.json)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows, tables = [], []
    figures: dict = {"batch": args.batch, "seconds": args.seconds, "learner_threads": torch.get_num_threads()}
    for size in args.sizes:
        spec = pixel_spec(size)
        cfg = SACConfig(num_critics=5, utd=1, batch_size=args.batch, encoder=EncoderConfig())
        agent = SACAgent(spec, 4, cfg)
        batches = [batch(spec, args.batch, rng) for _ in range(3)]
        ours = updates_per_s(agent, batches, args.seconds)
        saved = encoders.frames_to_input
        encoders.frames_to_input = naive_input
        try:
            naive = updates_per_s(agent, batches, args.seconds)
        finally:
            encoders.frames_to_input = saved
        med, p99 = inference_ms(agent, random_obs(spec, (), rng))
        rows.append((size, ours, naive, med, p99))
        if args.profile and size == args.sizes[0]:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for b in batches:
                    agent.update(b)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
            tables.append(profile_table(prof, size))
    speed = Table(f"Pixel PickCube (front + wrist), batch {args.batch}, 5 LN critics, {torch.get_num_threads()} torch "
                  "threads for the learner, 1 for the actor",
                  ["image", "learner updates/s (ours)", "naive path", "ours vs naive", "actor inference median / p99"])
    for size, ours, naive, med, p99 in rows:
        speed.add(f"2x{size}²", f"{ours:.1f}", f"{naive:.1f}", f"{ours / naive:.2f}x", f"{med:.2f} / {p99:.2f} ms")
    tables.insert(0, speed)
    figures["sizes"] = [{"size": size, "updates_per_s": ours, "naive_updates_per_s": naive,
                         "inference_ms_median": med, "inference_ms_p99": p99} for size, ours, naive, med, p99 in rows]
    if args.bundled:
        from robot_rl.cli import resolve_config
        from robot_rl.config import parse
        from robot_rl.training.config import TrainConfig

        run = parse(TrainConfig, resolve_config("pickcube_pixels_end_to_end"), [])
        kwargs = dict(run.env.kwargs)
        spec, cfg = pixel_spec(kwargs.pop("image_size"), **kwargs), run.agent
        agent = SACAgent(spec, 4, cfg)
        rate = updates_per_s(agent, [batch(spec, cfg.batch_size, rng) for _ in range(3)], args.seconds)
        med, p99 = inference_ms(agent, random_obs(spec, (), rng))
        bundled = Table("The bundled pickcube_pixels_end_to_end agent",
                        ["agent", "learner updates/s", "actor inference median / p99"])
        bundled.add(f"pickcube_pixels_end_to_end.yaml ({cfg.num_critics} critics, batch {cfg.batch_size}, "
                    f"2x{run.env.kwargs['image_size']}², no object state)", f"{rate:.1f}", f"{med:.2f} / {p99:.2f} ms")
        tables.insert(1, bundled)
        figures["bundled"] = {"num_critics": cfg.num_critics, "batch": cfg.batch_size,
                              "image_size": run.env.kwargs["image_size"], "updates_per_s": rate,
                              "inference_ms_median": med, "inference_ms_p99": p99}
    print(f"results: {write_result('pixel_speed', figures, args.out, tables=tables)}")


if __name__ == "__main__":
    main()
