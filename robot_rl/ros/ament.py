"""``robot-rl ros-index PREFIX``: registers package ``robot_rl`` in an ament index so that ``ros2 launch robot_rl
sim_arm.launch.yaml`` and ``ros2 run robot_rl arm_hardware`` work on a ROS 2 install.

Writes, under PREFIX: ``share/ament_index/resource_index/packages/robot_rl`` (the marker ``ros2`` looks for),
``share/robot_rl/package.xml``, ``share/robot_rl/launch/*.yaml`` (copies of this checkout's launch files) and
``lib/robot_rl/<exec>`` (symlinks to the installed console scripts). Then ``export
AMENT_PREFIX_PATH=PREFIX:$AMENT_PREFIX_PATH`` (after sourcing the ROS 2 setup).
"""

from __future__ import annotations

import inspect
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from tyro.conf import Positional, arg

from robot_rl.config import parse_command
from robot_rl.ros.launch import EXECUTABLES, LAUNCH_DIR, PACKAGE, executable_path
from robot_rl.utils.command import command_error

PACKAGE_XML = """<?xml version="1.0"?>
<package format="3">
  <name>robot_rl</name>
  <version>0.1.0</version>
  <description>Sample-efficient RL for robots: MuJoCo hardware, impedance/driving controllers, safety node</description>
  <maintainer email="robot_rl@example.invalid">robot_rl</maintainer>
  <license>Apache-2.0</license>
  <exec_depend>rclpy</exec_depend>
  <exec_depend>std_msgs</exec_depend>
  <exec_depend>sensor_msgs</exec_depend>
  <exec_depend>geometry_msgs</exec_depend>
  <exec_depend>nav_msgs</exec_depend>
  <exec_depend>std_srvs</exec_depend>
  <exec_depend>diagnostic_msgs</exec_depend>
  <export><build_type>ament_python</build_type></export>
</package>
"""


def write_index(prefix: str | Path, launch_dir: Path = LAUNCH_DIR) -> Path:
    """Creates (or refreshes) the ament index entries for ``robot_rl`` under ``prefix``; returns the prefix."""
    prefix = Path(prefix).resolve()
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")
    share = prefix / "share" / PACKAGE
    (share / "launch").mkdir(parents=True, exist_ok=True)
    (share / "package.xml").write_text(PACKAGE_XML)
    for f in sorted(launch_dir.glob("*.yaml")) if launch_dir.is_dir() else []:
        shutil.copy2(f, share / "launch" / f.name)
    lib = prefix / "lib" / PACKAGE
    lib.mkdir(parents=True, exist_ok=True)
    for exe in EXECUTABLES:
        link = lib / exe
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(executable_path(PACKAGE, exe))
    return prefix


@dataclass(frozen=True)
class RosIndexArgs:
    """Register package robot_rl in an ament index (package marker, package.xml, launch files, executables) so that
    `ros2 launch robot_rl ...` and `ros2 run robot_rl ...` resolve; then add PREFIX to AMENT_PREFIX_PATH."""

    prefix: Annotated[Positional[str], arg(metavar="PREFIX")]
    """Folder of the index (created if missing; an existing index is refreshed), e.g. ~/robot_rl_ament."""


def main(argv: list[str]) -> int:
    """``robot-rl ros-index PREFIX``."""
    args = parse_command(RosIndexArgs, argv, prog="robot-rl ros-index", description=inspect.getdoc(RosIndexArgs))
    try:
        prefix = write_index(args.prefix)
    except (OSError, ValueError) as exc:  # an unwritable prefix, or the console scripts not installed
        return command_error("robot-rl ros-index", exc)
    # The result and the step left to do, on stdout.
    print(f"ament index for {PACKAGE} written under {prefix}\n  export AMENT_PREFIX_PATH={prefix}:$AMENT_PREFIX_PATH")
    return 0
