"""``robot-rl record-frames`` and ``robot-rl train-reward`` (registered in :mod:`robot_rl.cli`).

    robot-rl record-frames TASK [--mode sim|keys] [--episodes 40] [--image-size 64] [--out PATH] ...
    robot-rl train-reward FRAMES [FRAMES ...] [--out DIR] [--config YAML] [--epochs N] [--threads N] ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robot_rl.rewards.classifier import TrainResult
    from robot_rl.rewards.frames import FrameStats


def _fail(prog: str, msg: object) -> int:
    print(f"robot-rl {prog}: error: {msg}", file=sys.stderr)
    return 2


def record_frames_main(argv: list[str]) -> int:
    from robot_rl.rewards.frames import SimFramesConfig

    d = SimFramesConfig()
    p = argparse.ArgumentParser(
        prog="robot-rl record-frames",
        description="Record camera frames labelled success/failure for the reward classifier. sim: labels from the "
                    "sim's success check while its scripted expert acts with noise and random segments. keys: you "
                    "drive with a teleop device and label with its event keys (success: this and the next frames "
                    "are successes; failure: back to failures; reset: new episode; pause: stop recording).")
    p.add_argument("task", help="sim task (PickCube, robot_rl/PegInsert-v0) or a gymnasium id")
    p.add_argument("--mode", choices=("sim", "keys"), default="sim", help="how frames are labelled (default sim)")
    p.add_argument("--out", default=None, help="dataset path (default reward_frames/<task>-<mode>-seed<seed>.zarr)")
    p.add_argument("--image-size", type=int, default=d.image_size, help=f"camera side in px (default {d.image_size})")
    p.add_argument("--cameras", default="", help="comma-separated cameras (default: the task's)")
    p.add_argument("--episodes", type=int, default=d.episodes, help=f"sim: episodes (default {d.episodes})")
    p.add_argument("--max-steps", type=int, default=d.max_episode_steps,
                   help=f"sim: steps per episode (default {d.max_episode_steps})")
    p.add_argument("--noise-max", type=float, default=d.noise_max, help="sim: max expert noise std")
    p.add_argument("--perturb-max", type=float, default=d.perturb_max,
                   help="sim: max share of random-action segments per episode")
    p.add_argument("--seed", type=int, default=0, help="sim: recording seed")
    p.add_argument("--device", default="keyboard",
                   help="keys: teleop device (keyboard, gamepad, spacemouse, ros); event keys README: Teleoperation")
    p.add_argument("--frames", type=int, default=2000, help="keys: stop after this many frames (Ctrl-C ends early)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    from robot_rl.datasets.record import resolve_env_id
    from robot_rl.rewards.frames import FramesError

    cameras = tuple(c for c in args.cameras.split(",") if c)
    try:
        env_id = resolve_env_id(args.task)
        out = Path(args.out) if args.out else (
            Path("reward_frames") / f"{env_id.split('/')[-1]}-{args.mode}-seed{args.seed}.zarr")
        if args.mode == "sim":
            from robot_rl.rewards.frames import record_sim_frames

            cfg = SimFramesConfig(task=env_id, episodes=args.episodes, image_size=args.image_size, cameras=cameras,
                                  max_episode_steps=args.max_steps, noise_max=args.noise_max,
                                  perturb_max=args.perturb_max, seed=args.seed)
            stats = record_sim_frames(cfg, out, progress=not args.no_progress, overwrite=args.overwrite)
        else:
            stats = _record_keys(env_id, args, cameras, out)
    except (ValueError, FileExistsError, FramesError, RuntimeError, OSError) as exc:
        return _fail("record-frames", exc)
    print(stats.summary())
    return 0


def _record_keys(env_id: str, args: argparse.Namespace, cameras: tuple[str, ...], out: Path) -> FrameStats:
    from robot_rl.envs.make import EnvConfig, make_env
    from robot_rl.rewards.frames import record_key_frames
    from robot_rl.teleop.config import TeleopConfig
    from robot_rl.teleop.factory import make_device

    if args.device in ("none", "scripted"):
        raise ValueError("keys mode needs a human device (keyboard, gamepad, spacemouse, ros); "
                         "use --mode sim for labels from the sim's success check")
    kwargs: dict = {"image_size": args.image_size} if env_id.startswith("robot_rl/") else {}
    if cameras:
        kwargs["cameras"] = cameras
    env = make_env(EnvConfig(id=env_id, kwargs=kwargs))
    device = None
    try:
        device = make_device(TeleopConfig(device=args.device), int(env.action_space.shape[0]))
        print(f"recording with {args.device}: success/failure keys set the label, reset starts a new episode, "
              "pause stops recording, Ctrl-C saves and ends", file=sys.stderr)
        return record_key_frames(env, device, out, max_frames=args.frames, progress=not args.no_progress,
                                 overwrite=args.overwrite, meta={"env_id": env_id, "env_kwargs": kwargs})
    finally:
        if device is not None:
            device.close()
        env.close()


def train_reward_main(argv: list[str]) -> int:
    from robot_rl.rewards.classifier import RewardClassifierConfig

    d = RewardClassifierConfig()
    p = argparse.ArgumentParser(
        prog="robot-rl train-reward",
        description="Train the success classifier on frames datasets (record-frames), calibrate its threshold on a "
                    "held-out validation split and report accuracy/precision/recall on a held-out test split.")
    p.add_argument("frames", nargs="+", help="frames dataset(s) written by `robot-rl record-frames`")
    p.add_argument("--out", default=None, help="output folder (default reward_classifiers/<first dataset name>)")
    p.add_argument("--config", default=None, help="YAML with RewardClassifierConfig fields (flags override it)")
    p.add_argument("--cameras", default=None, help="comma-separated cameras (default: all in the dataset)")
    p.add_argument("--epochs", type=int, default=None, help=f"training epochs (default {d.epochs})")
    p.add_argument("--batch-size", type=int, default=None, help=f"frames per step (default {d.batch_size})")
    p.add_argument("--lr", type=float, default=None, help=f"learning rate (default {d.lr})")
    p.add_argument("--min-precision", type=float, default=None,
                   help="only thresholds with this validation precision are eligible (default 0)")
    p.add_argument("--pretrained", default=None,
                   help="safetensors conv-encoder weights (ObservationEncoder.save_pretrained) to use, frozen")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--device", default=None, help="torch device (default cpu)")
    p.add_argument("--seed", type=int, default=None, help="split/initialisation seed (default 0)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing classifier at --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    from robot_rl.config import ConfigError, load_yaml
    from robot_rl.rewards.classifier import save_classifier, train_classifier
    from robot_rl.rewards.frames import FramesError, load_frames

    try:
        cfg = load_yaml(RewardClassifierConfig, args.config) if args.config else RewardClassifierConfig()
        for key in ("epochs", "batch_size", "lr", "min_precision", "threads", "device", "seed"):
            if getattr(args, key) is not None:
                setattr(cfg, key, getattr(args, key))
        if args.cameras is not None:
            cfg.cameras = tuple(c for c in args.cameras.split(",") if c)
        if args.pretrained:
            cfg.encoder.pretrained_path, cfg.encoder.freeze_pretrained = args.pretrained, True
        cfg.validate()
        out = Path(args.out) if args.out else Path("reward_classifiers") / Path(args.frames[0]).name.removesuffix(
            ".zarr")
        if out.exists() and any(out.iterdir()) and not args.overwrite:
            raise FileExistsError(f"{out} already exists and is not empty (choose another --out or --overwrite)")
        data = [load_frames(f, cfg.cameras) for f in args.frames]
        result = train_classifier(data, cfg, progress=not args.no_progress)
        save_classifier(result.model, out, {
            "metrics": result.metrics, "history": result.history, "best_epoch": result.best_epoch,
            "train_seconds": result.seconds, "frames": result.frames, "datasets": [str(f) for f in args.frames]})
    except (ValueError, ConfigError, FramesError, FileExistsError, FileNotFoundError, KeyError) as exc:
        return _fail("train-reward", exc)
    _print_report(result, out)
    return 0


def _print_report(result: TrainResult, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"reward classifier (threshold {result.threshold:.3f}, best epoch {result.best_epoch}, "
                        f"{result.seconds:.1f} s)")
    for col in ("split", "frames", "success", "accuracy", "precision", "recall", "false +", "false -"):
        table.add_column(col, justify="left" if col == "split" else "right")
    names = {"train": "train", "val": "val (calib.)", "test": "TEST (held out)", "test_near_transition": "test near"}
    for split, name in names.items():
        m = result.metrics[split]
        table.add_row(name, str(m["frames"]), str(m["positives"]),
                      f"{m['accuracy']:.3f}", f"{m['precision']:.3f}", f"{m['recall']:.3f}", str(m["fp"]),
                      str(m["fn"]))
    Console().print(table)
    print("test near = held-out frames within 3 steps of a label change (the hard cases)")
    print(json.dumps({"classifier": str(out), "threshold": round(result.threshold, 4),
                      "test": {k: round(v, 4) for k, v in result.metrics["test"].items()}}))
