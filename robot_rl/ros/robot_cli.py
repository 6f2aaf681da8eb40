"""``robot-rl robot``: a robot profile on its own, before any training (registered in :mod:`robot_rl.cli`).

    robot-rl robot list
    robot-rl robot show PROFILE [--overrides JSON]
    robot-rl robot check PROFILE [--namespace NS] [--timeout 10] [--no-safety] [--use-sim-time]

``show`` prints the profile as the env and the safety node read it (``extends`` and overrides merged: mappings merge,
lists and ``none`` replace). ``check`` runs the whole preflight of ``robot-rl train`` against the live graph, the
safety node included, and reports every wrong field at once (exit 2), or ``ok`` (exit 0). Only ``check`` needs ROS 2.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Annotated

import yaml
from tyro.conf import Positional, arg

from robot_rl.config import ConfigError, JsonDict, parse_action, to_dict
from robot_rl.robots.profile import bundled_profiles, load_profile, with_overrides
from robot_rl.utils.command import command_error


@dataclass(frozen=True)
class ListArgs:
    """List the bundled robot profiles (``rehearsal/<name>``: the same against robot_rl's emulated driver)."""


@dataclass(frozen=True)
class ShowArgs:
    """Print a robot profile resolved: its ``extends`` chain and overrides merged, every field with its value."""

    profile: Annotated[Positional[str], arg(metavar="PROFILE")]
    """A bundled profile name (``robot-rl robot list``) or a profile YAML path."""
    overrides: JsonDict = field(default_factory=dict)
    """Fields replaced, nested as in the YAML (what ``env.kwargs.profile_overrides`` does)."""


@dataclass(frozen=True)
class CheckArgs:
    """Check a robot profile against the live ROS 2 graph, as ``robot-rl train`` does before anything moves: the
    driver's topics, joints, frames, URDF and controllers, and robot_rl's safety node in front of them. Every wrong
    field is reported at once."""

    profile: Annotated[Positional[str], arg(metavar="PROFILE")]
    """A bundled profile name or a profile YAML path."""
    overrides: JsonDict = field(default_factory=dict)
    """Fields replaced, nested as in the YAML."""
    namespace: str = ""
    """The env's ROS 2 namespace (where the safety node's topics are)."""
    timeout: float = 10.0
    """Seconds the first check waits for discovery; once one has failed, the others wait 2 s each."""
    safety: bool = True
    """Also check robot_rl's safety node (``--no-safety``: the driver only)."""
    use_sim_time: bool = False
    """Take time from ``/clock`` (a simulated robot)."""


ACTIONS = {"list": ListArgs, "show": ShowArgs, "check": CheckArgs}
USAGE = __doc__.split("\n\n")[1]


def _load(ref: str, overrides: dict) -> object:
    profile = load_profile(ref)
    return with_overrides(profile, overrides) if overrides else profile


def main(argv: list[str]) -> int:
    """``robot-rl robot ACTION ...``."""
    parsed = parse_action("robot", ACTIONS, USAGE, argv)
    if isinstance(parsed, int):
        return parsed
    action, args = parsed
    prog = f"robot-rl robot {action}"
    if isinstance(args, ListArgs):
        for name in bundled_profiles():
            print(f"{name:32s} {load_profile(name).description}")
        return 0
    try:
        profile = _load(args.profile, dict(args.overrides))
    except ConfigError as exc:
        return command_error(prog, exc)
    if isinstance(args, ShowArgs):
        print(yaml.safe_dump(to_dict(profile), sort_keys=False, width=118), end="")
        return 0
    from robot_rl.ros.link import check_live  # optional: ros2 (imports rclpy)

    start = time.monotonic()
    try:
        check_live(profile, args.namespace, args.use_sim_time, args.timeout, args.safety)
    except ConfigError as exc:
        return command_error(prog, f"{len(str(exc).splitlines())} problem(s):\n{exc}")
    print(json.dumps({"profile": profile.name, "ok": True, "safety_node": args.safety,
                      "seconds": round(time.monotonic() - start, 1)}))
    return 0
