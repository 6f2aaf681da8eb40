"""The generated reference pages of the docs site: every config dataclass's fields (docs/reference/config.md), every
``robot-rl`` command's ``--help`` (docs/reference/cli.md) and the ROS 2 node parameters
(docs/reference/ros2-parameters.md). ``python -m robot_rl.reference_docs`` (or ``bash scripts/gen_docs.sh``)
rewrites them; a test checks they are current, so they are never hand-copied."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from robot_rl import cli
from robot_rl.utils.field_docs import markdown_table, ros_reference
from robot_rl.utils.imports import import_object

ROOT = Path(__file__).resolve().parents[1]
# Characters of a code line the docs site shows without a horizontal scrollbar (mkdocs-material 9.x with
# docs/stylesheets/extra.css), the narrower of a 1366 px and a 1920 px wide window. Code is 0.85 em of the 0.8 rem
# typeset text = 0.68 rem; a monospace character is about 0.6 em of it; pre > code is padded 1.176 em a side; both
# sidebars (12.1 rem each) show from 76.25 em; the content keeps 1.2 rem margins beside them.
#   1366 px: root 20 px (125 %, under 100 em); grid 1366 - 15 (page scrollbar) = 1351 px (under the 1480 px cap);
#            content 1351 - 2 x 242 - 2 x 24 = 819 px; code 13.6 px, padding 2 x 16 = 32 px, 8.16 px a character:
#            (819 - 32) / 8.16 = 96.4 characters.
#   1920 px: root 22 px (137.5 %, from 100 em to 125 em); grid capped at 1480 px by extra.css;
#            content 1480 - 2 x 266.2 - 2 x 26.4 = 894.8 px; code 14.96 px, padding 35.2 px, 8.976 px a character:
#            (894.8 - 35.2) / 8.976 = 95.8 characters.
#   1220 to 1366 px (1280 px, say): extra.css narrows the sidebars (to 9 rem at the least) to keep these columns.
# The tests keep every line of a fenced block in docs/ within it, and the CLI reference is rendered at it.
CODE_COLUMNS = 95
PAGES = {"config": "docs/reference/config.md", "cli": "docs/reference/cli.md",
         "ros": "docs/reference/ros2-parameters.md"}
# source folder -> import name (sim/ and controllers/ install under prefixed names)
PACKAGES = {"robot_rl": "robot_rl", "sim": "robot_rl_sim", "controllers": "robot_rl_controllers"}
# configuration dataclasses whose names do not end in "Config"
EXTRA_CONFIGS = ("robot_rl.safety.limits:ArmLimits", "robot_rl.safety.limits:CarLimits",
                 "robot_rl_controllers.impedance:ImpedanceGains",
                 "robot_rl_controllers.driving:DifferentialDriveParams")
SECTIONS = {  # module prefix -> section title, in page order
    "robot_rl.training": "Training run", "robot_rl.envs": "Environments", "robot_rl.agents": "Agents",
    "robot_rl.replay": "Replay", "robot_rl.policies": "Base policies", "robot_rl.vla": "The small VLA",
    "robot_rl.teleop": "Teleoperation", "robot_rl.view": "Operator view", "robot_rl.cameras": "Cameras",
    "robot_rl.robots.camera": "Cameras",
    "robot_rl.rewards": "Reward classifier",
    "robot_rl.ros": "ROS 2", "robot_rl.safety": "Safety limits", "robot_rl_sim": "Simulation tasks",
    "robot_rl_controllers": "Controllers and ROS 2 nodes",
}


def _is_dataclass_node(node: ast.ClassDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def config_targets() -> list[str]:
    """``module:Class`` of every config dataclass in the packages: top-level dataclasses named ``*Config`` (found in
    the sources, so a new one is in the reference without being listed anywhere) plus ``EXTRA_CONFIGS``."""
    found = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            module = ".".join([package, *path.relative_to(ROOT / folder).with_suffix("").parts])
            module = module.removesuffix(".__init__")
            found += [f"{module}:{node.name}" for node in tree.body
                      if isinstance(node, ast.ClassDef) and node.name.endswith("Config") and _is_dataclass_node(node)]
    return found + list(EXTRA_CONFIGS)


def _section(target: str) -> str:
    return next((title for prefix, title in SECTIONS.items() if target.startswith(prefix)), "Other")


def config_reference() -> str:
    """One table per config dataclass (fields not expanded: a nested config is a row naming its own table)."""
    by_section: dict[str, list[str]] = {}
    for target in config_targets():
        by_section.setdefault(_section(target), []).append(target)
    parts = ["# Configuration reference\n",
             "Every field of every configuration dataclass, generated from the dataclasses and the docstring under "
             "each field by `bash scripts/gen_docs.sh`; do not edit. A training run's config is `TrainConfig`; its "
             "nested configs are set with dotted flags (`--agent.utd 4`, `--env.kwargs '{...}'`) or the same keys in "
             "YAML. A nested config appears as a row naming its class; its fields are in that class's table.\n"]
    for title in dict.fromkeys([*SECTIONS.values(), "Other"]):  # a title may have more than one prefix
        if title not in by_section:
            continue
        parts.append(f"## {title}\n")
        for target in by_section[title]:
            cls: Any = import_object(target, "config class")
            doc = " ".join((cls.__doc__ or "").split())
            doc = "" if doc.startswith(cls.__name__ + "(") else doc  # the signature dataclass() writes, not prose
            parts.append(f"### {cls.__name__}\n\n`{target}`{(' — ' + doc) if doc else ''}\n\n"
                         f"{markdown_table(cls, expand=False, head='field')}\n")
    return "\n".join(parts)


CLI_COMMANDS = (["train"], ["learner"], ["actor"], ["eval"], ["record-demos"], ["demos", "show"],
                ["demos", "discard"], ["datasets", "export"], ["datasets", "import"], ["record-frames"],
                ["train-reward"], ["train-bc"], ["distill"], ["serve-policy"], ["export"], ["launch"], ["ros-index"])


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main([*argv, "--help"])
        except SystemExit:
            pass
    return "\n".join(_fit(line.rstrip()) for line in out.getvalue().strip().splitlines())


def _fit(line: str, width: int = CODE_COLUMNS) -> str:
    """``line`` wrapped at word boundaries to ``width`` (a help paragraph the CLI prints unwrapped), keeping its
    indentation; a word longer than the width stays whole."""
    if len(line) <= width:
        return line
    indent = line[:len(line) - len(line.lstrip())]
    return textwrap.fill(line.strip(), width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def cli_reference() -> str:
    """``robot-rl --help`` and every command's ``--help``, as printed at ``CODE_COLUMNS`` columns."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(CODE_COLUMNS)
    try:
        parts = ["# Command-line reference\n",
                 "The `robot-rl` command and each of its commands' `--help`, generated by `bash scripts/gen_docs.sh`; "
                 "do not edit. The fields of `train` are those of `TrainConfig` "
                 "([configuration reference](config.md)).\n",
                 f"## robot-rl\n\n```text\n{(cli.__doc__ or '').strip()}\n```\n"]
        for argv in CLI_COMMANDS:
            parts.append(f"## robot-rl {' '.join(argv)}\n\n```text\n{_help(argv)}\n```\n")
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts)


def render(page: str) -> str:
    return {"config": config_reference, "cli": cli_reference, "ros": ros_reference}[page]()


def main(argv: list[str] | None = None) -> int:
    """Rewrites the pages named (default: all) and says which changed."""
    for page in (argv if argv is not None else sys.argv[1:]) or list(PAGES):
        path = ROOT / PAGES[page]
        text = render(page)
        changed = not path.exists() or path.read_text() != text
        path.write_text(text)
        print(f"{PAGES[page]}: {'rewritten' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
