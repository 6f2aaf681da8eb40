"""``robot-rl record-demos`` and ``robot-rl demos`` (registered in :mod:`robot_rl.cli`).

    robot-rl record-demos TASK [--device scripted|keyboard|gamepad|spacemouse|ros] [-n 20] [--out PATH]
                          [--noise 0.1] [--seed 0] [--image-size 0] [--teleop-config YAML] [--device-path P]
    robot-rl demos show PATH [--episode K] [--video out.gif|out.mp4] [--camera C] [--fps F] [--scale S]
    robot-rl demos discard PATH EPISODE [EPISODE ...]

Each command's options are the fields of a dataclass below, parsed by :func:`robot_rl.config.parse_command`
(``--help`` lists them with their docstrings).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import tyro
import yaml
import zarr
from rich.console import Console
from rich.table import Table
from tyro.conf import Positional, arg

from robot_rl.config import JsonDict, from_dict, parse_action, parse_command
from robot_rl.datasets.convert import export_dataset, import_dataset
from robot_rl.datasets.edit import discard_episodes
from robot_rl.datasets.record import DEFAULT_NOISE, dataset_name, make_device, read_meta, record_demos, resolve_env_id
from robot_rl.datasets.show import dataset_stats, render_episode
from robot_rl.replay.store import ReplayStoreError
from robot_rl.teleop.config import TeleopConfig
from robot_rl.utils.command import command_error, derived
from robot_rl.utils.log import get_logger
from robot_rl.view.config import ViewConfig

if TYPE_CHECKING:
    from robot_rl.teleop.config import TeleopConfig

log = get_logger(__name__)


@tyro.conf.configure(tyro.conf.FlagCreatePairsOff)
@dataclass(frozen=True)
class RecordDemosArgs:
    """Record demonstrations of a task into a dataset in the replay format (zarr)."""

    task: Annotated[Positional[str], arg(metavar="TASK")]
    """Sim task (reach, PickCube, PegInsert-v0, robot_rl/Reach-v0) or a gymnasium id."""
    device: str = "scripted"
    """scripted (the task's expert), or you on a keyboard, gamepad, spacemouse or ros
    (docs/guides/demos-and-teleop.md)."""
    episodes: Annotated[int, arg(aliases=("-n",))] = 20
    """Demos to keep."""
    out: Annotated[str | None, derived("PATH", "demos/<task>-<n>-seed<seed>[-<kwargs hash>].zarr, the name that "
                                               "training's on-demand generation uses")] = None
    """Dataset path."""
    noise: float = DEFAULT_NOISE
    """Std of the Gaussian noise on the scripted expert's actions."""
    seed: int = 0
    """Recording seed: same seed, same dataset."""
    image_size: int = 0
    """Camera image side in pixels; 0 records state only."""
    env_kwargs: JsonDict = field(default_factory=dict)
    """Keyword arguments of the env, as one JSON object: e.g. a robot env's profile,
    '{"profile": "my_arm.yaml"}' for robot_rl.envs.ros_env:robot_rl/RosArm-v0."""
    keep_failures: bool = False
    """Keep failed episodes (labelled) too."""
    teleop_config: Annotated[str | None, derived("YAML", "none")] = None
    """YAML of teleop settings (TeleopConfig fields: axes, buttons, deadzone, scale, ...)."""
    device_path: Annotated[str | None, derived("P", "the first found")] = None
    """Which device: a terminal path, a joystick index, a hidraw path or vendor:product."""
    rate: Annotated[float | None, derived("HZ", "the env's")] = None
    """Control rate in Hz for human devices (0: unpaced)."""
    countdown: Annotated[float | None, derived("S", "wait for the ready key")] = None
    """Human devices: each attempt starts S seconds after the previous one ended (the ready key starts it earlier);
    0 starts at once; unset waits for the ready key or button (keyboard g, gamepad B, or the success key)."""
    episode_seconds: Annotated[float | None, derived("S", "no limit")] = None
    """Human devices: an attempt ends (truncated) after S seconds, shown as time left; unset, only your labels
    and the task's own end stop it (the task's step limit does not apply to a person)."""
    overwrite: bool = False
    """Replace an existing dataset at --out."""
    progress: Annotated[bool, arg(help_behavior_hint="")] = True
    """Progress bar (off with --no-progress)."""
    view: ViewConfig = field(default_factory=ViewConfig)
    """The live operator view (--view.enabled; the view extra): cameras, your actions, time left and the
    session's progress in rerun's viewer, every attempt saved as <out>.view/attempt_<k>.rrd."""


@tyro.conf.configure(tyro.conf.FlagCreatePairsOff)
@dataclass(frozen=True)
class ShowArgs:
    """Per-episode stats of a dataset or replay store; --video writes an episode as GIF/MP4."""

    path: Annotated[Positional[str], arg(metavar="PATH")]
    """A dataset (record-demos) or any replay store (.zarr)."""
    episode: Annotated[int | None, derived("K", "all in the table, the first rendered")] = None
    """Only this episode in the table; the episode to render."""
    video: Annotated[str | None, derived("FILE", "none")] = None
    """Write the episode to this .gif or .mp4 file."""
    camera: Annotated[str | None, derived("C", "all side by side")] = None
    """One camera."""
    fps: Annotated[float | None, derived("F", "the control rate")] = None
    """Frames per second."""
    scale: int = 0
    """Integer enlargement of the frames (0: to at least 128 px high)."""
    size: int = 256
    """Render side in pixels when re-simulating a state-only dataset."""


@dataclass(frozen=True)
class DiscardArgs:
    """Remove episodes from a recorded dataset (rewritten atomically)."""

    path: Annotated[Positional[str], arg(metavar="PATH")]
    """A dataset written by record-demos."""
    episodes: Annotated[Positional[tuple[int, ...]], arg(metavar="EPISODE [EPISODE ...]",
                                                         help_behavior_hint="(required)")]
    """Episode ids (as listed by demos show)."""


def record_main(argv: list[str]) -> int:
    args = parse_command(RecordDemosArgs, argv, prog="robot-rl record-demos")

    try:
        teleop = _teleop_config(args)
        make_device(args.device, args.noise, teleop)  # fail before building anything
        env_id = resolve_env_id(args.task)
        kwargs: dict = {**args.env_kwargs, **({"image_size": args.image_size} if args.image_size else {})}
        out = Path(args.out) if args.out else Path("demos") / dataset_name(
            env_id, args.episodes, args.seed, kwargs, noise=args.noise, only_successes=not args.keep_failures,
            device=args.device)
        stats = record_demos(env_id, args.episodes, out, noise=args.noise, seed=args.seed,
                             only_successes=not args.keep_failures, env_kwargs=kwargs, progress=args.progress,
                             device=args.device, overwrite=args.overwrite, teleop=teleop, rate_hz=args.rate,
                             start=args.countdown, episode_seconds=args.episode_seconds, view=args.view)
    except (ValueError, FileExistsError, RuntimeError, OSError) as exc:
        return command_error("robot-rl record-demos", exc)
    except KeyboardInterrupt:
        log.warning("interrupted before any demo was kept; nothing written")
        return 130
    print(stats.summary())
    return 0


def _teleop_config(args: RecordDemosArgs) -> TeleopConfig:
    """The TeleopConfig of ``--teleop-config`` (YAML, checked field by field) and ``--device-path``."""
    cfg = TeleopConfig()
    if args.teleop_config:
        data = yaml.safe_load(Path(args.teleop_config).read_text()) or {}
        cfg = from_dict(TeleopConfig, data.get("teleop", data), "teleop")
    if args.device_path is not None:
        cfg = dataclasses.replace(cfg, device_path=args.device_path)
    cfg.validate()
    return cfg


DEMOS_ACTIONS = {"show": ShowArgs, "discard": DiscardArgs}
DEMOS_USAGE = """usage: robot-rl demos {show,discard} ...

Inspect demo datasets and replay stores.

  show     per-episode stats; --video writes an episode as GIF/MP4
  discard  remove episodes from a recorded dataset (rewritten atomically)

`robot-rl demos ACTION --help` lists the options of an action."""


def demos_main(argv: list[str]) -> int:
    parsed = parse_action("demos", DEMOS_ACTIONS, DEMOS_USAGE, argv)
    if isinstance(parsed, int):
        return parsed
    args = parsed[1]
    return _discard(args) if isinstance(args, DiscardArgs) else _show(args)


def _discard(args: DiscardArgs) -> int:
    if not args.episodes:  # tyro accepts an empty tuple; discarding nothing is a mistake
        return command_error("robot-rl demos discard", "name at least one EPISODE to discard")
    try:
        left = discard_episodes(args.path, list(args.episodes))
    except (ValueError, OSError, ReplayStoreError) as exc:
        return command_error("robot-rl demos discard", exc)
    print(f"discarded {sorted(set(args.episodes))}; {len(left)} episodes left in {args.path}")
    return 0


def _show(args: ShowArgs) -> int:

    console = Console()
    path = Path(args.path)
    try:
        if not path.exists():
            raise FileNotFoundError(f"no dataset at {path}")
        meta = read_meta(path)
        episodes = dataset_stats(path)
    except (FileNotFoundError, ValueError, ReplayStoreError) as exc:
        return command_error("robot-rl demos show", exc)
    shown = [e for e in episodes if args.episode is None or e["episode"] == args.episode]
    if args.episode is not None and not shown:
        return command_error("robot-rl demos show", f"no episode {args.episode} in {path}")
    partitions = sorted({e["partition"] for e in episodes})
    optional = {"partition": len(partitions) > 1, "label": any(e["label"] for e in episodes),
                "seconds": any(e["seconds"] is not None for e in episodes),
                "held": any(e["held_steps"] for e in episodes), "intervened": any(e["intervened"] for e in episodes)}
    columns = ["episode", "partition", "length", "return", "success", "label", "seconds", "held", "mean |a|",
               "intervened", "reset seed"]
    columns = [c for c in columns if optional.get(c, True)]
    table = Table(title=str(path))
    for col in columns:
        table.add_column(col, justify="left" if col in ("partition", "label") else "right")
    for e in shown:
        cells = {"episode": str(e["episode"]), "partition": e["partition"], "length": str(e["length"]),
                 "return": f"{e['return']:.2f}",
                 "success": "?" if e["success"] is None else ("yes" if e["success"] else "no"),
                 "label": e["label"] or "-", "seconds": "-" if e["seconds"] is None else f"{e['seconds']:.1f}",
                 "held": str(e["held_steps"] or 0), "mean |a|": f"{e['action_abs']:.2f}",
                 "intervened": str(e["intervened"]),
                 "reset seed": "-" if e["reset_seed"] is None else str(e["reset_seed"])}
        table.add_row(*(cells[c] for c in columns))
    console.print(table)
    if episodes:
        lengths = np.array([e["length"] for e in episodes])
        labelled = [e["success"] for e in episodes if e["success"] is not None]
        rate = f"{100 * np.mean(labelled):.0f} %" if labelled else "unlabelled"
        size_mb = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6
        console.print(f"{len(episodes)} episodes, {int(lengths.sum())} transitions, length mean {lengths.mean():.1f} "
                      f"(min {lengths.min()}, max {lengths.max()}), success {rate}, {size_mb:.2f} MB on disk")
    if meta:
        how = f"noise={meta['noise']}" if meta.get("noise") is not None else f"at {meta.get('rate_hz', 0):g} Hz"
        later = f", {len(meta['discarded_later'])} of them later" if meta.get("discarded_later") else ""
        stop = " (stopped early)" if meta.get("interrupted") else ""
        console.print(f"recorded: {meta['env_id']} {meta.get('env_kwargs') or ''} device={meta['device']} {how} "
                      f"seed={meta['seed']}; {meta['attempts']} attempts, {meta['discarded']} discarded{later}{stop}")
    if args.video:
        episode = args.episode if args.episode is not None else (episodes[0]["episode"] if episodes else 0)
        try:
            scale = args.scale
            if scale <= 0:
                scale = _auto_scale(path)
            info = render_episode(path, episode, args.video, camera=args.camera, fps=args.fps, scale=scale,
                                  size=args.size)
        except (ValueError, ReplayStoreError) as exc:
            return command_error("robot-rl demos show", exc)
        extra = (f", re-simulated from the recorded seed (max state difference {info['max_state_error']:.2g})"
                 if info["source"] == "resimulated" else "")
        console.print(f"episode {episode}: {info['frames']} frames {info['width']}x{info['height']} at "
                      f"{info['fps']:g} fps -> {info['path']}{extra}")
    return 0


def _auto_scale(path: Path) -> int:
    """Enlargement that brings stored camera frames to >= 128 px high (1 for re-simulated video)."""
    cams = dict(zarr.open_group(str(path), mode="r").attrs).get("cameras") or {}
    heights = [int(shape[0]) for shape in cams.values()]
    return max(1, -(-128 // min(heights))) if heights else 1



@dataclass(frozen=True)
class ExportArgs:
    """Write a demo dataset, a run's replay (its latest checkpoint) or a replay store as a LeRobotDataset v3.0."""

    path: Annotated[Positional[str], arg(metavar="PATH")]
    """A demo dataset, a run folder or a replay store (zarr)."""
    out: str
    """The new dataset folder."""
    format: str = "lerobot"
    """lerobot (LeRobotDataset v3.0)."""
    partitions: tuple[str, ...] = ()
    """Partitions to export (demos, online, interventions); default: every one holding data."""
    robot_type: str | None = None
    """info.json's robot_type (default: the env id)."""


@dataclass(frozen=True)
class ImportArgs:
    """Read a LeRobotDataset v3.0, or recorded ROS 2 arm bags, into a robot_rl demo dataset (for --demos PATH or
    train-bc --datasets PATH)."""

    folder: Annotated[Positional[str], arg(metavar="DIR")]
    """The LeRobot dataset folder (meta/info.json, data/, videos/), or a folder of rosbag2 bags (a RosArmEnv
    record_dir, or bags from ros2 bag record)."""
    out: str
    """The demo dataset to write (zarr)."""
    format: str = "lerobot"
    """lerobot or rosbag."""
    object_state: bool = True
    """rosbag: append the object pose to the state (as RosArmEnv's object_state)."""
    cameras: tuple[str, ...] = ()
    """rosbag: cameras to read from camera/<name>/image_raw."""
    instruction_encoder: str = "hash"
    """How tasks become instruction embeddings (hash, hash:<dim>, minilm): match the env's env.instruction_encoder."""
    env_id: str = ""
    """The env the demos are for (stored in dataset.json)."""


DATASETS_ACTIONS = {"export": ExportArgs, "import": ImportArgs}
DATASETS_USAGE = """usage: robot-rl datasets {export,import} ...

Convert datasets: robot_rl's replay format <-> LeRobotDataset v3.0.

  export   PATH --out DIR [--format lerobot]   (a demo dataset, a run folder or a replay store)
  import   DIR --out PATH [--format lerobot|rosbag]   (into a demo dataset)

`robot-rl datasets ACTION --help` lists the options of an action."""


def datasets_main(argv: list[str]) -> int:
    parsed = parse_action("datasets", DATASETS_ACTIONS, DATASETS_USAGE, argv)
    if isinstance(parsed, int):
        return parsed
    action, args = parsed

    try:
        if isinstance(args, ExportArgs):
            if args.format != "lerobot":
                raise ValueError(f"unknown format {args.format!r} (formats: lerobot)")
            info = export_dataset(args.path, args.out, list(args.partitions) or None, args.robot_type)
            print(f"{info['total_episodes']} episodes, {info['total_frames']} frames, {info['total_tasks']} tasks "
                  f"-> {args.out} (LeRobotDataset {info['codebase_version']})")
        else:
            meta = import_dataset(args.folder, args.out, args.instruction_encoder, args.env_id, args.format,
                                  args.object_state, args.cameras)
            print(f"{len(meta['episodes'])} episodes -> {args.out}")
    except (ValueError, OSError, ReplayStoreError) as exc:
        return command_error(f"robot-rl datasets {action}", exc)
    return 0
