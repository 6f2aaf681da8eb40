"""``robot-rl ros-index PREFIX``: registers package ``robot_rl`` in an ament index so that ``ros2 launch robot_rl
sim_arm.launch.yaml`` and ``ros2 run robot_rl arm_hardware`` work on a ROS 2 install.

Writes, under PREFIX: ``share/ament_index/resource_index/packages/robot_rl`` (the marker ``ros2`` looks for),
``share/robot_rl/package.xml``, ``share/robot_rl/launch/*.yaml`` (copies of this checkout's launch files) and
``lib/robot_rl/<exec>`` (symlinks to the installed console scripts). Then ``export
AMENT_PREFIX_PATH=PREFIX:$AMENT_PREFIX_PATH`` (after sourcing the ROS 2 setup).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from robot_rl.ros.launch import EXECUTABLES, PACKAGE, executable_path

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
LAUNCH_DIR = Path(__file__).resolve().parents[2] / "launch"


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


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    prefix = write_index(argv[0])
    print(f"ament index for {PACKAGE} written under {prefix}\n  export AMENT_PREFIX_PATH={prefix}:$AMENT_PREFIX_PATH",
          file=sys.stderr)
    return 0
