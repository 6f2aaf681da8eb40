"""``robot-rl record-demos`` and ``robot-rl demos`` (registered in :mod:`robot_rl.cli`).

    robot-rl record-demos TASK [--device scripted|keyboard|gamepad|spacemouse|ros] [-n 20] [--out PATH]
                          [--noise 0.1] [--seed 0] [--image-size 0] [--teleop-config YAML] [--device-path P]
    robot-rl demos show PATH [--episode K] [--video out.gif|out.mp4] [--camera C] [--fps F] [--scale S]
    robot-rl demos discard PATH EPISODE [EPISODE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from robot_rl.datasets.record import DEFAULT_NOISE, DEVICES


def record_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="robot-rl record-demos",
        description="Record demonstrations of a task into a dataset in the replay format (zarr).")
    parser.add_argument("task", help="sim task (reach, PickCube, PegInsert-v0, robot_rl/Reach-v0) or a gymnasium id")
    parser.add_argument("--device", default="scripted",
                        help=f"action source: {', '.join(DEVICES)} (scripted: the task's expert; the others: you, "
                             "on that teleop device; keys/buttons label success/failure, discard, pause)")
    parser.add_argument("-n", "--episodes", dest="n", type=int, default=20, help="demos to keep (default 20)")
    parser.add_argument("--out", default=None,
                        help="dataset path (default demos/<task>-<n>-seed<seed>[-<kwargs hash>].zarr, the name "
                             "that training's on-demand generation uses)")
    parser.add_argument("--noise", type=float, default=DEFAULT_NOISE,
                        help="std of the Gaussian noise on the scripted expert's actions (default 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="recording seed: same seed, same dataset")
    parser.add_argument("--image-size", type=int, default=0,
                        help="camera image side in pixels; 0 records state only (default)")
    parser.add_argument("--keep-failures", action="store_true", help="keep failed episodes (labelled) too")
    parser.add_argument("--teleop-config", default=None,
                        help="YAML of teleop settings (TeleopConfig fields: axes, buttons, deadzone, scale, ...)")
    parser.add_argument("--device-path", default=None,
                        help="which device: a terminal path, a joystick index, a hidraw path or vendor:product")
    parser.add_argument("--rate", type=float, default=None,
                        help="control rate in Hz for human devices (default: the env's; 0: unpaced)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    from robot_rl.datasets.record import dataset_name, make_device, record_demos, resolve_env_id

    def fail(msg: object) -> int:
        print(f"robot-rl record-demos: error: {msg}", file=sys.stderr)
        return 2

    try:
        teleop = _teleop_config(args)
        make_device(args.device, args.noise, teleop)  # fail before building anything
        env_id = resolve_env_id(args.task)
        kwargs: dict = {"image_size": args.image_size} if args.image_size else {}
        out = Path(args.out) if args.out else Path("demos") / dataset_name(
            env_id, args.n, args.seed, kwargs, noise=args.noise, only_successes=not args.keep_failures,
            device=args.device)
        stats = record_demos(env_id, args.n, out, noise=args.noise, seed=args.seed,
                             only_successes=not args.keep_failures, env_kwargs=kwargs,
                             progress=not args.no_progress, device=args.device, overwrite=args.overwrite,
                             teleop=teleop, rate_hz=args.rate)
    except (ValueError, FileExistsError, RuntimeError, OSError) as exc:
        return fail(exc)
    except KeyboardInterrupt:
        print("robot-rl record-demos: interrupted before any demo was kept; nothing written", file=sys.stderr)
        return 130
    print(stats.summary())
    return 0


def _teleop_config(args: argparse.Namespace):
    """The TeleopConfig of ``--teleop-config`` (YAML, checked field by field) and ``--device-path``."""
    import dataclasses

    import yaml

    from robot_rl.config import from_dict
    from robot_rl.teleop.config import TeleopConfig

    cfg = TeleopConfig()
    if args.teleop_config:
        data = yaml.safe_load(Path(args.teleop_config).read_text()) or {}
        cfg = from_dict(TeleopConfig, data.get("teleop", data), "teleop")
    if args.device_path is not None:
        cfg = dataclasses.replace(cfg, device_path=args.device_path)
    cfg.validate()
    return cfg


def demos_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl demos", description="Inspect demo datasets and replay stores.")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    show = sub.add_parser("show", help="per-episode stats; --video writes an episode as GIF/MP4")
    show.add_argument("path", help="a dataset (record-demos) or any replay store (.zarr)")
    show.add_argument("--episode", type=int, default=None,
                      help="only this episode in the table; the episode to render (default: the first)")
    show.add_argument("--video", default=None, help="write the episode to this .gif or .mp4 file")
    show.add_argument("--camera", default=None, help="one camera (default: all side by side)")
    show.add_argument("--fps", type=float, default=None, help="frames per second (default: the control rate)")
    show.add_argument("--scale", type=int, default=0,
                      help="integer enlargement of the frames (default: to at least 128 px high)")
    show.add_argument("--size", type=int, default=256,
                      help="render side in pixels when re-simulating a state-only dataset (default 256)")
    discard = sub.add_parser("discard", help="remove episodes from a recorded dataset (rewritten atomically)")
    discard.add_argument("path", help="a dataset written by record-demos")
    discard.add_argument("episodes", type=int, nargs="+", help="episode ids (as listed by demos show)")
    args = parser.parse_args(argv)
    if args.action is None:
        parser.print_help()
        return 2
    if args.action == "discard":
        from robot_rl.datasets.edit import discard_episodes
        from robot_rl.replay.store import ReplayStoreError

        try:
            left = discard_episodes(args.path, args.episodes)
        except (ValueError, OSError, ReplayStoreError) as exc:
            print(f"robot-rl demos discard: error: {exc}", file=sys.stderr)
            return 2
        print(f"discarded {sorted(set(args.episodes))}; {len(left)} episodes left in {args.path}")
        return 0
    return _show(args)


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from robot_rl.datasets.record import read_meta
    from robot_rl.datasets.show import dataset_stats, render_episode
    from robot_rl.replay.store import ReplayStoreError

    console = Console()
    path = Path(args.path)
    try:
        if not path.exists():
            raise FileNotFoundError(f"no dataset at {path}")
        meta = read_meta(path)
        episodes = dataset_stats(path)
    except (FileNotFoundError, ValueError, ReplayStoreError) as exc:
        print(f"robot-rl demos show: error: {exc}", file=sys.stderr)
        return 2
    shown = [e for e in episodes if args.episode is None or e["episode"] == args.episode]
    if args.episode is not None and not shown:
        print(f"robot-rl demos show: error: no episode {args.episode} in {path}", file=sys.stderr)
        return 2
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
            print(f"robot-rl demos show: error: {exc}", file=sys.stderr)
            return 2
        extra = (f", re-simulated from the recorded seed (max state difference {info['max_state_error']:.2g})"
                 if info["source"] == "resimulated" else "")
        console.print(f"episode {episode}: {info['frames']} frames {info['width']}x{info['height']} at "
                      f"{info['fps']:g} fps -> {info['path']}{extra}")
    return 0


def _auto_scale(path: Path) -> int:
    """Enlargement that brings stored camera frames to >= 128 px high (1 for re-simulated video)."""
    import zarr

    cams = dict(zarr.open_group(str(path), mode="r").attrs).get("cameras") or {}
    heights = [int(shape[0]) for shape in cams.values()]
    return max(1, -(-128 // min(heights))) if heights else 1

