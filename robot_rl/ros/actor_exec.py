"""ROS 2 executable ``actor`` (console script ``robot-rl-actor``): ``robot-rl actor`` started from a launch file.

A launcher appends ``--ros-args ...`` (node name, remaps); the actor is not a node itself (its env makes one), so
that tail is dropped and the rest goes to ``robot-rl actor`` (e.g. ``--run-dir RUN --index 0``)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from robot_rl.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in args:
        args = args[: args.index("--ros-args")]
    return cli_main(["actor", *args])
