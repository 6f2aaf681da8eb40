"""robot_rl's pixel update beside LeRobot's SAC update, in one process on this machine: the same input (2 x 64² cameras
and proprioception, 4-D actions), batch 128, 2 critics, one critic step plus one actor and temperature step per
update (UTD 1), the same torch threads, timed in interleaved rounds (a busy machine slows every row alike).

    MUJOCO_GL=egl .venv-lowest/bin/python benchmarks/pixel_vs_lerobot.py [--seconds 48] [--rounds 8] [--threads 2]
        [--out FILE]

It needs a Python with both robot_rl and ``lerobot`` (0.4.4 for Python 3.11): ``bash scripts/test_lowest.sh`` makes
``.venv-lowest`` with both. Rows: robot_rl's ``pickcube_pixels_end_to_end`` (conv encoder trained by the critics,
float32) and ``pickcube_pixels`` (16-channel strided stem pre-trained on the demos, its conv layers then frozen,
under bfloat16 autocast: timed after the pre-training); LeRobot's ``SACPolicy`` with its default image encoder (4
conv layers of 32 channels, frozen as its config defaults to: its learner feeds the critics from a no-grad encoder
pass) and the same encoder trained (``freeze_vision_encoder=False``). A LeRobot update is what its
``lerobot/rl/learner.py`` does per step: critic loss, backward, gradient clipping, Adam step, target update, then
actor and temperature. Per row: updates/s, the ratio to each LeRobot row (median of per-round ratios), actor
inference time for one observation, and the share of an update spent in convolutions (torch profiler).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch
from common import Table, write_result
from pixel_options import conv_share, conv_share_of
from pixel_speed import batch, pixel_spec, random_obs

from robot_rl.agents import SACAgent
from robot_rl.spaces import ObsSpec

ACTION_DIM = 4


def robot_rl_rows(spec: ObsSpec, size: int, rng: np.random.Generator) -> dict[str, tuple[Callable, Callable, Callable]]:
    from robot_rl.cli import resolve_config
    from robot_rl.config import parse
    from robot_rl.training.config import TrainConfig

    rows = {}
    batches = None
    for name in ("pickcube_pixels_end_to_end", "pickcube_pixels"):
        cfg = dataclasses.replace(parse(TrainConfig, resolve_config(name), []).agent, utd=1, batch_size=128)
        agent = SACAgent(spec, ACTION_DIM, cfg)
        if cfg.encoder.pretrain_steps:  # what the run's updates are after the pre-training (speed: any weights)
            agent.encoder_pretraining.skip()
        batches = batches or [batch(spec, cfg.batch_size, rng) for _ in range(3)]
        obs = {k: (v[0, 0] if k == "state" else {c: f[0, 0] for c, f in v.items()})
               for k, v in random_obs(spec, (1, 1), rng).items()}
        rows[f"robot_rl {name}"] = (
            (lambda a=agent, bs=batches: [a.update(b) for b in bs]),
            (lambda a=agent, o=obs: a.act(o)),
            (lambda a=agent, bs=batches: conv_share(a, bs)))
    return rows


def lerobot_rows(spec: ObsSpec, rng: np.random.Generator) -> dict[str, tuple[Callable, Callable, Callable]]:
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.sac.configuration_sac import SACConfig
    from lerobot.policies.sac.modeling_sac import SACPolicy

    keys = {c: f"observation.images.{c}" for c in spec.cameras}

    def tensors(b: int) -> dict[str, torch.Tensor]:
        out = {keys[c]: torch.rand(b, shape[2], shape[0], shape[1]) for c, shape in spec.cameras.items()}
        out["observation.state"] = torch.from_numpy(rng.standard_normal((b, spec.state_dim)).astype(np.float32))
        return out

    b = 128
    batches = [{"action": torch.rand(b, ACTION_DIM) * 2 - 1, "reward": torch.randn(b), "done": torch.zeros(b),
                "state": tensors(b), "next_state": tensors(b)} for _ in range(3)]
    features = {keys[c]: PolicyFeature(type=FeatureType.VISUAL, shape=(s[2], s[0], s[1]))
                for c, s in spec.cameras.items()}
    features["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(spec.state_dim,))
    rows = {}
    for frozen in (True, False):
        cfg = SACConfig(input_features=features, num_critics=2, freeze_vision_encoder=frozen,
                        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(ACTION_DIM,))})
        policy = SACPolicy(cfg)
        params = policy.get_optim_params()
        opt = {k: torch.optim.Adam(v if k != "temperature" else [v], lr=3e-4) for k, v in params.items()}

        def update(p: SACPolicy = policy, o: dict = opt, bs: list = batches) -> None:
            for bt in bs:
                fb = dict(bt)
                if p.config.freeze_vision_encoder:  # what its learner's get_observation_features does when frozen
                    with torch.no_grad():
                        fb["observation_feature"] = p.actor.encoder.get_cached_image_features(bt["state"])
                        fb["next_observation_feature"] = p.actor.encoder.get_cached_image_features(bt["next_state"])
                for model, params in (("critic", p.critic_ensemble.parameters()), ("actor", p.actor.parameters()),
                                      ("temperature", [p.log_alpha])):
                    loss = p.forward(fb, model=model)[f"loss_{model}"]
                    o[model].zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(params, max_norm=p.config.grad_clip_norm)
                    o[model].step()
                    if model == "critic":
                        p.update_target_networks()

        one = {k: v[:1] for k, v in tensors(1).items()}
        name = "LeRobot SAC, default encoder (frozen)" if frozen else "LeRobot SAC, encoder trained"
        rows[name] = (update, (lambda p=policy, x=one: p.select_action(x)),
                      (lambda u=update: conv_share_of(u)))
    return rows


def act_ms(act: Callable[[], object], n: int = 200) -> float:
    for _ in range(10):
        act()
    t0 = time.perf_counter()
    for _ in range(n):
        act()
    return 1000 * (time.perf_counter() - t0) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=48.0, help="timed seconds per row, over all rounds")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--out", default=None, help="result file (default: benchmarks/results/pixel_vs_lerobot.json)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import lerobot

    size, rng = 64, np.random.default_rng(0)
    spec = pixel_spec(size, object_state=False)
    rows = {**robot_rl_rows(spec, size, rng), **lerobot_rows(spec, rng)}
    for update, _, _ in rows.values():  # warm-up: kernels chosen, buffers allocated
        update()
    rates: dict[str, list[float]] = {name: [] for name in rows}
    slot = args.seconds / args.rounds
    for r in range(args.rounds):
        for name, (update, _, _) in rows.items():
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < slot:
                update()  # 3 updates, one per prepared batch
                n += 3
            rates[name].append(n / (time.perf_counter() - t0))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{rates[k][-1]:.1f}" for k in rows), flush=True)
    acting = {name: act_ms(act) for name, (_, act, _) in rows.items()}
    shares = {name: share() for name, (_, _, share) in rows.items()}
    lerobot_names = [n for n in rows if n.startswith("LeRobot")]
    table = Table(f"Updates/s, 2 x {size}² cameras + proprioception, batch 128, 2 critics, UTD 1, {args.threads} torch "
                  f"threads, torch {torch.__version__}, lerobot {lerobot.__version__}; {args.rounds} interleaved "
                  f"rounds of {slot:.1f} s per row",
                  ["learner", "updates/s (median)", *[f"vs {n}" for n in lerobot_names],
                   "actor inference (1 obs)", "convolutions' share"])
    for name in rows:
        ratios = [f"{np.median(np.array(rates[name]) / np.array(rates[n])):.2f}x" for n in lerobot_names]
        table.add(name, f"{np.median(rates[name]):.1f}", *ratios, f"{acting[name]:.2f} ms",
                  f"{100 * shares[name]:.0f} %")
    figures = {"image_size": size, "batch": 128, "num_critics": 2, "threads": args.threads,
               "lerobot": lerobot.__version__, "rates": rates, "act_ms": acting, "conv_share": shares}
    print(f"results: {write_result('pixel_vs_lerobot', figures, args.out, tables=[table])}")


if __name__ == "__main__":
    main()
