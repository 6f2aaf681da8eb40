"""``robot-rl record-frames`` and ``robot-rl train-reward`` (registered in :mod:`robot_rl.cli`).

    robot-rl record-frames TASK [--mode sim|keys] [--episodes 40] [--image-size 64] [--out PATH] ...
    robot-rl train-reward FRAMES [FRAMES ...] [--out DIR] [--config YAML] [--epochs N] [--threads N] ...

Each command's options are the fields of a dataclass below, parsed by :func:`robot_rl.config.parse_command`
(``--help`` lists them with their docstrings).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import tyro
from rich.console import Console
from rich.table import Table
from tyro.conf import Positional, arg

from robot_rl.config import ConfigError, JsonDict, load_yaml, parse_command
from robot_rl.datasets.record import resolve_env_id
from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.rewards.classifier import RewardClassifierConfig, save_classifier, train_classifier
from robot_rl.rewards.frames import FramesError, SimFramesConfig, load_frames, record_key_frames, record_sim_frames
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.factory import make_device
from robot_rl.utils.command import command_error, derived
from robot_rl.utils.log import get_logger

if TYPE_CHECKING:
    from robot_rl.rewards.classifier import TrainResult
    from robot_rl.rewards.frames import FrameStats

log = get_logger(__name__)
_CONFIG = "the config's"  # train-reward flags left unset keep the RewardClassifierConfig value
_SIM = SimFramesConfig()  # record-frames defaults are the sim recorder's


@tyro.conf.configure(tyro.conf.FlagCreatePairsOff)
@dataclass(frozen=True)
class RecordFramesArgs:
    """Record camera frames labelled success/failure for the reward classifier. sim: labels from the sim's success
    check while its scripted expert acts with noise and random segments. keys: you drive with a teleop device and
    label with its event keys (success: this and the next frames are successes; failure: back to failures; reset:
    new episode; pause: stop recording)."""

    task: Annotated[Positional[str], arg(metavar="TASK")]
    """Sim task (PickCube, robot_rl/PegInsert-v0) or a gymnasium id."""
    mode: Literal["sim", "keys"] = "sim"
    """How frames are labelled."""
    out: Annotated[str | None, derived("PATH", "reward_frames/<task>-<mode>-seed<seed>.zarr")] = None
    """Dataset path."""
    image_size: int = _SIM.image_size
    """Camera side in px."""
    cameras: Annotated[str, derived("A,B", "the task's")] = ""
    """Comma-separated cameras."""
    episodes: int = _SIM.episodes
    """sim: episodes."""
    max_steps: int = _SIM.max_episode_steps
    """sim: steps per episode."""
    noise_max: float = _SIM.noise_max
    """sim: max expert noise std."""
    perturb_max: float = _SIM.perturb_max
    """sim: max share of random-action segments per episode."""
    seed: int = 0
    """sim: recording seed."""
    device: str = "keyboard"
    """keys: teleop device (keyboard, gamepad, spacemouse, ros); event keys: docs/guides/demos-and-teleop.md."""
    env_kwargs: JsonDict = field(default_factory=dict)
    """keys: keyword arguments of the env, as one JSON object: e.g. a robot env's profile,
    '{"profile": "my_arm.yaml"}' for robot_rl.envs.ros_env:robot_rl/RosArm-v0 (its cameras are the profile's)."""
    teleop_config: Annotated[str | None, derived("YAML", "none")] = None
    """keys: YAML of teleop settings (TeleopConfig fields: axes, buttons, ros_topic, gripper_mode, ...)."""
    frames: int = 2000
    """keys: stop after this many frames (Ctrl-C ends early)."""
    overwrite: bool = False
    """Replace an existing dataset at --out."""
    progress: Annotated[bool, arg(help_behavior_hint="")] = True
    """Progress bar (off with --no-progress)."""


@tyro.conf.configure(tyro.conf.FlagCreatePairsOff)
@dataclass(frozen=True)
class TrainRewardArgs:
    """Train the success classifier on frames datasets (record-frames), calibrate its threshold on a held-out
    validation split and report accuracy/precision/recall on a held-out test split."""

    frames: Annotated[Positional[tuple[str, ...]], arg(metavar="FRAMES [FRAMES ...]", help_behavior_hint="(required)")]
    """Frames dataset(s) written by `robot-rl record-frames`."""
    out: Annotated[str | None, derived("DIR", "reward_classifiers/<first dataset name>")] = None
    """Output folder."""
    config: Annotated[str | None, derived("YAML", "none")] = None
    """YAML with RewardClassifierConfig fields (flags override it)."""
    cameras: Annotated[str | None, derived("A,B", "all in the dataset")] = None
    """Comma-separated cameras."""
    epochs: Annotated[int | None, derived("N", _CONFIG)] = None
    """Training epochs."""
    batch_size: Annotated[int | None, derived("N", _CONFIG)] = None
    """Frames per step."""
    lr: Annotated[float | None, derived("LR", _CONFIG)] = None
    """Learning rate."""
    min_precision: Annotated[float | None, derived("P", _CONFIG)] = None
    """Only thresholds with this validation precision are eligible."""
    pretrained: Annotated[str | None, derived("FILE", "none")] = None
    """safetensors conv-encoder weights (ObservationEncoder.save_pretrained) to use, frozen."""
    threads: Annotated[int | None, derived("N", _CONFIG)] = None
    """torch CPU threads (0: torch's setting)."""
    device: Annotated[str | None, derived("DEV", _CONFIG)] = None
    """torch device (cpu, cuda, ...)."""
    seed: Annotated[int | None, derived("N", _CONFIG)] = None
    """Split/initialisation seed."""
    overwrite: bool = False
    """Replace an existing classifier at --out."""
    progress: Annotated[bool, arg(help_behavior_hint="")] = True
    """Progress bar (off with --no-progress)."""


def record_frames_main(argv: list[str]) -> int:
    # getdoc: the multi-line docstring dedented for --help
    args = parse_command(RecordFramesArgs, argv, prog="robot-rl record-frames",
                         description=inspect.getdoc(RecordFramesArgs))

    cameras = tuple(c for c in args.cameras.split(",") if c)
    try:
        env_id = resolve_env_id(args.task)
        out = Path(args.out) if args.out else (
            Path("reward_frames") / f"{env_id.split('/')[-1]}-{args.mode}-seed{args.seed}.zarr")
        if args.mode == "sim":
            cfg = SimFramesConfig(task=env_id, episodes=args.episodes, image_size=args.image_size, cameras=cameras,
                                  max_episode_steps=args.max_steps, noise_max=args.noise_max,
                                  perturb_max=args.perturb_max, seed=args.seed)
            stats = record_sim_frames(cfg, out, progress=args.progress, overwrite=args.overwrite)
        else:
            stats = _record_keys(env_id, args, cameras, out)
    except (ValueError, FileExistsError, FramesError, RuntimeError, OSError) as exc:
        return command_error("robot-rl record-frames", exc)
    print(stats.summary())
    return 0


def _record_keys(env_id: str, args: RecordFramesArgs, cameras: tuple[str, ...], out: Path) -> FrameStats:
    if args.device in ("none", "scripted"):
        raise ValueError("keys mode needs a human device (keyboard, gamepad, spacemouse, ros); "
                         "use --mode sim for labels from the sim's success check")
    kwargs: dict = {"image_size": args.image_size} if env_id.startswith("robot_rl/") else {}
    if cameras:
        kwargs["cameras"] = cameras
    kwargs.update(args.env_kwargs)
    teleop = load_yaml(TeleopConfig, args.teleop_config) if args.teleop_config else TeleopConfig()
    env = make_env(EnvConfig(id=env_id, kwargs=kwargs))
    device = None
    try:
        device = make_device(dataclasses.replace(teleop, device=args.device), int(env.action_space.shape[0]))
        log.info("recording with %s: success/failure keys set the label, reset starts a new episode, "
                 "pause stops recording, Ctrl-C saves and ends", args.device)
        return record_key_frames(env, device, out, max_frames=args.frames, progress=args.progress,
                                 overwrite=args.overwrite, meta={"env_id": env_id, "env_kwargs": kwargs})
    finally:
        if device is not None:
            device.close()
        env.close()


def train_reward_main(argv: list[str]) -> int:
    args = parse_command(TrainRewardArgs, argv, prog="robot-rl train-reward",
                         description=inspect.getdoc(TrainRewardArgs))

    if not args.frames:  # tyro accepts an empty tuple
        return command_error("robot-rl train-reward", "name at least one FRAMES dataset")
    try:
        cfg = load_yaml(RewardClassifierConfig, args.config) if args.config else RewardClassifierConfig()
        # Flags given override the YAML; replace() rather than setattr: configs may be frozen.
        changes = {key: getattr(args, key) for key in ("epochs", "batch_size", "lr", "min_precision", "threads",
                                                         "device", "seed") if getattr(args, key) is not None}
        if args.cameras is not None:
            changes["cameras"] = tuple(c for c in args.cameras.split(",") if c)
        if args.pretrained:
            changes["encoder"] = dataclasses.replace(cfg.encoder, pretrained_path=args.pretrained,
                                                     freeze_pretrained=True)
        cfg = dataclasses.replace(cfg, **changes)
        cfg.validate()
        out = Path(args.out) if args.out else Path("reward_classifiers") / Path(args.frames[0]).name.removesuffix(
            ".zarr")
        if out.exists() and any(out.iterdir()) and not args.overwrite:
            raise FileExistsError(f"{out} already exists and is not empty (choose another --out or --overwrite)")
        data = [load_frames(f, cfg.cameras) for f in args.frames]
        result = train_classifier(data, cfg, progress=args.progress)
        save_classifier(result.model, out, {
            "metrics": result.metrics, "history": result.history, "best_epoch": result.best_epoch,
            "train_seconds": result.seconds, "frames": result.frames, "datasets": [str(f) for f in args.frames]})
    except (ValueError, ConfigError, FramesError, FileExistsError, FileNotFoundError, KeyError) as exc:
        return command_error("robot-rl train-reward", exc)
    _print_report(result, out)
    return 0


def _print_report(result: TrainResult, out: Path) -> None:
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
    if (says := result.constant()) is not None:
        ends = "at its first step" if says == "success" else "never (by the classifier)"
        log.warning(f"the classifier says {says} for every held-out frame: as the reward it ends every episode "
                    f"{ends}. Record more frames, in more episodes with both outcomes (each episode's frames stay "
                    "in one split), or train more epochs (--epochs)")
