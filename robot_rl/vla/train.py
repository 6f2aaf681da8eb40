"""``robot-rl train-bc``: trains the small VLA by behaviour cloning on demo datasets of one or several tasks, then
evaluates it per task.

Output folder: the policy (``policy.json`` + ``model.safetensors``; saved again at every evaluation and at the
end), ``config.yaml``, TensorBoard scalars (``tb/``), ``metrics.jsonl``, ``learning_curve.png`` and
``eval.json`` (per task: success, return, cycle time with CIs).

Datasets are demo-dataset paths or ``scripted:<task>:<episodes>[:<noise>]``, recorded with the task's scripted
expert on first use (``demos/``), with the model's cameras at its image size, no privileged object state and the
instruction on: what a VLA sees on a robot.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.agents.encoders import random_shift
from robot_rl.config import JsonDict, save_yaml
from robot_rl.datasets.record import DEFAULT_NOISE, dataset_name, is_complete, record_demos, resolve_env_id
from robot_rl.policies.config import ExecutionConfig
from robot_rl.policies.vla_model import SmallVLA, VLAConfig, images_to_input
from robot_rl.policies.vla_policy import VLAPolicy, load_vla
from robot_rl.text import make_text_encoder
from robot_rl.training.evaluation import evaluate_policy
from robot_rl.training.run_logger import RunLogger
from robot_rl.utils.log import get_logger
from robot_rl.utils.progress import progress_bar
from robot_rl.vla.data import ChunkDataset

log = get_logger(__name__)


@dataclass(frozen=True)
class TrainBCConfig:
    """Behaviour cloning of the small VLA (``robot-rl train-bc``)."""

    datasets: tuple[str, ...] = ("scripted:PickColor:200", "scripted:Reach:100", "scripted:PickCube:100",
                                 "scripted:PegInsert:100")
    """Demo datasets: paths, or ``scripted:<task>:<episodes>[:<noise>]`` recorded on first use into ``demo_dir``."""
    out: str = "policies/vla"
    """Output folder (the saved policy and the training logs)."""
    demo_dir: str = "demos"
    """Where ``scripted:`` datasets are recorded."""
    demo_env_kwargs: JsonDict = field(default_factory=lambda: {"object_state": False, "instruction": True})
    """Env kwargs of ``scripted:`` recordings (the cameras and image size come from the model config)."""
    steps: int = 6000
    """Gradient steps."""
    batch_size: int = 64
    """Samples per step."""
    lr: float = 3e-4
    """AdamW learning rate (linear warm-up, cosine decay)."""
    warmup_steps: int = 200
    """Linear learning-rate warm-up."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient norm clip."""
    augment_shift: int = 4
    """Random-shift augmentation of the frames (pixels; 0 = off)."""
    state_offset_max: int = 0
    """> 0: train for future-state-aware execution (state and targets from 0..K steps after the frames)."""
    seed: int = 0
    """Seed of initialisation, sampling and augmentation."""
    threads: int = 0
    """Torch threads (0 = torch's default)."""
    eval_every: int = 0
    """Evaluate every N steps (0 = only at the end)."""
    eval_episodes: int = 20
    """Episodes per task in each evaluation (0 = none)."""
    log_every: int = 50
    """Log losses every N steps."""
    progress: bool = True
    """Show a progress bar."""
    model: VLAConfig = field(default_factory=VLAConfig)
    """The model's architecture."""
    init: str = ""
    """A saved small-VLA folder to start from: its weights, architecture (``model`` is then ignored) and state
    normalisation (e.g. re-training the generalist on a fine-tuned specialist's episodes: ``robot-rl distill``)."""
    execution: ExecutionConfig = field(default_factory=lambda: ExecutionConfig(mode="sync"))
    """How evaluation executes the chunks."""

    def validate(self) -> None:
        if not self.datasets:
            raise ValueError("train-bc: datasets is empty")
        if self.steps < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError("train-bc: steps, batch_size must be >= 1 and lr > 0")
        self.model.validate()
        self.execution.validate()


def resolve_datasets(cfg: TrainBCConfig, progress: bool) -> list[Path]:
    """Paths of the configured datasets; ``scripted:`` ones recorded on first use."""
    out = []
    for spec in cfg.datasets:
        if not spec.startswith("scripted:"):
            if not Path(spec).exists():
                raise ValueError(f"datasets: {spec} does not exist")
            out.append(Path(spec))
            continue
        parts = spec.split(":")
        if len(parts) not in (3, 4) or not parts[2].isdigit():
            raise ValueError(f"datasets: {spec!r} is not scripted:<task>:<episodes>[:<noise>]")
        env_id = resolve_env_id(parts[1])
        noise = float(parts[3]) if len(parts) == 4 else DEFAULT_NOISE
        kwargs = {**cfg.demo_env_kwargs, "image_size": cfg.model.image_size, "cameras": list(cfg.model.cameras)}
        path = Path(cfg.demo_dir) / dataset_name(env_id, int(parts[2]), cfg.seed, kwargs, noise=noise)
        if not is_complete(path, int(parts[2])):
            stats = record_demos(env_id, int(parts[2]), path, noise=noise, seed=cfg.seed, env_kwargs=kwargs,
                                 progress=progress, overwrite=path.exists())
            log.info("%s", stats.summary())
        out.append(path)
    return out


def _lr(cfg: TrainBCConfig, step: int) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    done = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, done)))


def evaluate_tasks(policy: Any, tasks: list[dict[str, Any]], episodes: int, execution: ExecutionConfig,
                   video_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """Per task (one per dataset): the policy's evaluation on ``episodes`` episodes."""
    results = {}
    for task in tasks:
        name = task["env_id"].split("/")[-1]
        results[name] = evaluate_policy(policy, task["env_id"], task["env_kwargs"], episodes, execution)
        if video_dir is not None:  # the first episodes again, rendered (rendering every step of all is slow)
            video_dir.mkdir(parents=True, exist_ok=True)
            evaluate_policy(policy, task["env_id"], task["env_kwargs"], min(3, episodes), execution,
                            video=video_dir / f"{name}.mp4")
    return results


def train_bc(cfg: TrainBCConfig) -> dict[str, Any]:
    """Trains, saves and evaluates the policy; returns the per-task evaluation."""
    cfg.validate()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = resolve_datasets(cfg, cfg.progress)
    start = load_vla(cfg.init) if cfg.init else None
    model_cfg = start.cfg if start is not None else cfg.model
    data = ChunkDataset(paths, model_cfg.chunk_length, model_cfg.text_encoder, model_cfg.cameras)
    if start is not None and (model_cfg.state_dim, model_cfg.action_dim) != (data.spec.state_dim, data.action_dim):
        raise ValueError(f"train-bc: init {cfg.init} takes state {model_cfg.state_dim} / action "
                         f"{model_cfg.action_dim}, the datasets have {data.spec.state_dim} / {data.action_dim}")
    model_cfg = dataclasses.replace(model_cfg, state_dim=data.spec.state_dim, action_dim=data.action_dim,
                                    text_dim=make_text_encoder(model_cfg.text_encoder).dim)
    cfg = dataclasses.replace(cfg, model=model_cfg)
    save_yaml(cfg, out / "config.yaml")
    torch.manual_seed(cfg.seed)  # the model's initial weights (a training script, not a library constructor)
    if start is not None:
        model = start.model.train()
        mean, std = start.state_mean.cpu().numpy(), start.state_std.cpu().numpy()
    else:
        model = SmallVLA(model_cfg)
        mean, std = data.state_stats()
    tasks = data.tasks()
    info = {"tasks": tasks, "train": {"steps": cfg.steps, "batch_size": cfg.batch_size, "seed": cfg.seed,
                                      "transitions": data.transitions}}
    policy = VLAPolicy(model, mean, std, "cpu", info)
    params = sum(p.numel() for p in model.parameters())
    log.info("small VLA: %.2f M parameters, %d transitions in %d datasets", params / 1e6, data.transitions,
             len(paths))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    logger = RunLogger(out, ("train/loss", "eval/success_rate"), "gradient steps")
    mean_t, std_t = torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32)
    results: dict[str, Any] = {}
    start = time.perf_counter()
    train_seconds = 0.0

    with progress_bar(cfg.progress, info=True) as bar:
        task = bar.add_task("train-bc", total=cfg.steps, info="")
        for step in range(cfg.steps):
            t0 = time.perf_counter()
            model.train()
            batch = data.sample(cfg.batch_size, rng, cfg.state_offset_max)
            images = {c: random_shift(images_to_input(torch.from_numpy(f), model_cfg.image_size), cfg.augment_shift,
                                      gen) for c, f in batch["frames"].items()}
            state = (torch.from_numpy(batch["state"]) - mean_t) / std_t
            context = model.encode(images, state, torch.from_numpy(batch["text"]))
            loss, metrics = model.loss(context, torch.from_numpy(batch["actions"]), torch.from_numpy(batch["mask"]),
                                       gen)
            for group in opt.param_groups:
                group["lr"] = _lr(cfg, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            train_seconds += time.perf_counter() - t0
            if step % cfg.log_every == 0 or step == cfg.steps - 1:
                logger.log({**metrics, "train/loss": float(loss.detach()), "train/grad_norm": float(grad),
                            "train/lr": _lr(cfg, step), "train/seconds": train_seconds}, step)
                bar.update(task, info=f"loss {float(loss.detach()):.4f}")
            bar.advance(task)
            last = step == cfg.steps - 1
            if cfg.eval_episodes and (last or (cfg.eval_every and (step + 1) % cfg.eval_every == 0)):
                model.eval()
                policy.save(out)
                results = evaluate_tasks(policy, tasks, cfg.eval_episodes, cfg.execution,
                                         out / "videos" if last else None)
                logger.log({f"eval/{name}/success_rate": r["success_rate"] for name, r in results.items()}
                           | {"eval/success_rate": float(np.mean([r["success_rate"] for r in results.values()]))},
                           step + 1)
                logger.plot()
    model.eval()
    policy.info["train"].update(seconds=round(train_seconds, 1), parameters=params)
    policy.save(out)
    summary = {"parameters": params, "train_seconds": train_seconds, "wall_seconds": time.perf_counter() - start,
               "transitions": data.transitions, "tasks": {k: {m: v for m, v in r.items() if m != "successes"}
                                                          for k, r in results.items()}}
    (out / "eval.json").write_text(json.dumps(summary, indent=1))
    logger.close()
    return summary
