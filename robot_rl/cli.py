"""The ``robot-rl`` command.

    robot-rl train [CONFIG] [--resume RUN_DIR] [--field.sub value ...]
    robot-rl eval RUN_DIR [RUN_DIR ...] [--episodes N] [--video out.gif|mp4]
    robot-rl learner --run-dir RUN [--resume]       (what `train` starts; run alone on another machine)
    robot-rl actor --run-dir RUN [--index I]        (likewise)
    robot-rl record-demos TASK [--device scripted] [-n 20] [--out PATH] [--noise 0.1] [--seed 0] [--image-size 0]
    robot-rl demos show PATH [--episode K] [--video out.gif|out.mp4]
    robot-rl record-frames TASK [--mode sim|keys] [--episodes 40] [--image-size 64] [--out PATH]  (reward frames)
    robot-rl train-reward FRAMES [FRAMES ...] [--out DIR] [--epochs N]   (success classifier for a learned reward)
    robot-rl launch FILE [name:=value ...] [--print]   (ROS 2 YAML launch file, e.g. launch/sim_arm.launch.yaml)
    robot-rl ros-index PREFIX                        (ament index entries so `ros2 launch robot_rl ...` resolves)

CONFIG is a YAML file or the name of a bundled task config (robot_rl/configs/<name>.yaml); every field of
TrainConfig can be overridden with a flag, e.g. ``--agent.utd 10 --total-env-steps 20000``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_CONFIG = "pendulum"


def resolve_config(name: str) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    bundled = CONFIG_DIR / f"{name}.yaml"
    if not bundled.is_file():
        known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
        raise SystemExit(f"unknown task config {name!r}: not a .yaml file and not bundled (bundled: {known})")
    return bundled


def cmd_train(argv: list[str]) -> int:
    from robot_rl.config import ConfigError, load_yaml, parse
    from robot_rl.runtime.config import TrainConfig
    from robot_rl.runtime.supervisor import train

    resume = None
    if "--resume" in argv:
        i = argv.index("--resume")
        if i + 1 >= len(argv):
            raise SystemExit("--resume needs a run folder")
        resume = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    config_path = None
    if argv and not argv[0].startswith("-"):
        config_path, argv = resolve_config(argv[0]), argv[1:]
    elif resume is not None:
        config_path = Path(resume) / "config.yaml"
    elif not any(a in ("-h", "--help") for a in argv):
        config_path = resolve_config(DEFAULT_CONFIG)
    try:
        if config_path is not None:
            load_yaml(TrainConfig, config_path)  # fail early with a clean message naming the field
        cfg = parse(TrainConfig, config_path, argv, prog="robot-rl train")
        cfg.validate()
    except (ConfigError, ValueError) as exc:
        print(f"robot-rl train: error: {exc}", file=sys.stderr)
        return 2
    try:
        run_dir, result = train(cfg, resume)
    except (FileExistsError, FileNotFoundError) as exc:
        print(f"robot-rl train: error: {exc}", file=sys.stderr)
        return 2
    print(f"run folder: {run_dir}")
    print("final evaluation: " + json.dumps({k: round(v, 3) for k, v in result.items()}))
    print(f"policy: {run_dir / 'checkpoints'}  curve: {run_dir / 'learning_curve.png'}")
    return 0


def _run_side(argv: list[str], prog: str) -> tuple[argparse.Namespace, object]:
    from robot_rl.config import load_yaml
    from robot_rl.runtime.config import TrainConfig

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--run-dir", required=True, help="run folder written by `robot-rl train` (config.yaml)")
    parser.add_argument("--resume", action="store_true", help="learner: restore the latest checkpoint")
    parser.add_argument("--index", type=int, default=0, help="actor: its index in the run")
    parser.add_argument("--incarnation", type=int, default=0, help="actor: how many times this index restarted")
    args = parser.parse_args(argv)
    return args, load_yaml(TrainConfig, Path(args.run_dir) / "config.yaml")


def cmd_learner(argv: list[str]) -> int:
    """The learner alone (e.g. on a GPU box): ``robot-rl learner --run-dir RUN [--resume]``."""
    from robot_rl.runtime.learner import Learner

    args, cfg = _run_side(argv, "robot-rl learner")
    import torch

    rt = cfg.runtime
    torch.set_num_threads(rt.learner_threads or max(1, (os.cpu_count() or 1) - rt.num_actors))
    if rt.learner_nice:
        os.nice(rt.learner_nice)  # the actors' control loops come first on a shared machine
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    learner = Learner(cfg, args.run_dir, resume=args.resume)
    try:
        learner.run()
    finally:
        learner.close()
    return 0


def cmd_actor(argv: list[str]) -> int:
    """One actor alone (e.g. on the robot PC): ``robot-rl actor --run-dir RUN [--index I]``."""
    from robot_rl.runtime.actor import Actor

    args, cfg = _run_side(argv, "robot-rl actor")
    # SIGTERM = stop cleanly: the partial chunk and the spool are flushed before exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    Actor(cfg, args.run_dir, index=args.index, incarnation=args.incarnation).run()
    return 0


def cmd_eval(argv: list[str]) -> int:
    from robot_rl.runtime.evaluation import evaluate_runs

    parser = argparse.ArgumentParser(prog="robot-rl eval", description="Deterministic evaluation of trained runs; "
                                     "several runs (seeds) also get the IQM with a stratified bootstrap 95 % CI.")
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--video", default=None, help="write the first run's episodes to this .gif or .mp4")
    args = parser.parse_args(argv)
    result = evaluate_runs(args.run_dirs, args.episodes, args.video)
    if len(args.run_dirs) == 1:
        result = result[args.run_dirs[0]]
    print(json.dumps(result, indent=2))
    if args.video:
        print(f"video: {args.video}", file=sys.stderr)
    return 0


def cmd_record_demos(argv: list[str]) -> int:
    from robot_rl.datasets.cli import record_main

    return record_main(argv)


def cmd_demos(argv: list[str]) -> int:
    from robot_rl.datasets.cli import demos_main

    return demos_main(argv)


def cmd_record_frames(argv: list[str]) -> int:
    from robot_rl.rewards.cli import record_frames_main

    return record_frames_main(argv)


def cmd_train_reward(argv: list[str]) -> int:
    from robot_rl.rewards.cli import train_reward_main

    return train_reward_main(argv)


def cmd_launch(argv: list[str]) -> int:
    from robot_rl.ros.launch import main as launch_main

    return launch_main(argv)


def cmd_ros_index(argv: list[str]) -> int:
    from robot_rl.ros.ament import main as ament_main

    return ament_main(argv)


COMMANDS = {"train": cmd_train, "learner": cmd_learner, "actor": cmd_actor, "eval": cmd_eval,
            "record-demos": cmd_record_demos, "demos": cmd_demos, "launch": cmd_launch, "ros-index": cmd_ros_index,
            "record-frames": cmd_record_frames, "train-reward": cmd_train_reward}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
