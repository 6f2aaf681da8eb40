"""Every field of a config dataclass with its type, default and docstring (the string literal under it), read from
the source: for generated references (``python -m robot_rl.utils.field_docs``), never hand-copied."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import textwrap
from typing import Any

from robot_rl.utils.imports import import_object


def field_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it, for ``cls`` and its bases."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, after in zip(body, body[1:] + [None]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                out[node.target.id] = " ".join(after.value.value.split())
    return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _type_name(kind: Any) -> str:
    return kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))


def field_rows(cls: type, prefix: str = "", expand: bool = True) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, doc)`` of every field of dataclass ``cls``; with ``expand``, the fields of a nested
    dataclass as ``prefix.field`` rows (else one row naming the nested class). A field without a default reads
    ``required``."""
    docs, rows = field_docstrings(cls), []
    for f in dataclasses.fields(cls):
        value = _default(f)
        if expand and dataclasses.is_dataclass(value):
            rows += field_rows(type(value), f"{prefix}{f.name}.")
            continue
        shown = "required" if value is dataclasses.MISSING else repr(value)
        if dataclasses.is_dataclass(value):
            shown = f"{type(value).__name__}()"
        rows.append((prefix + f.name, _type_name(f.type), shown, docs.get(f.name, "")))
    return rows


def markdown_table(cls: type, read_only: tuple[str, ...] = (), expand: bool = True, head: str = "parameter") -> str:
    """A Markdown table of ``cls``'s fields (start-up-only ones marked)."""
    lines = [f"| {head} | type | default | |", "|---|---|---|---|"]
    for name, kind, default, doc in field_rows(cls, expand=expand):
        mark = " (start-up only)" if name in read_only else ""
        doc = doc.replace("|", r"\|")  # a pipe outside a code span would split the cell
        lines.append(f"| `{name}` | `{kind}` | `{default}` | {doc}{mark} |")
    return "\n".join(lines)


ROS_NODES = {  # node (executable) -> its config dataclass
    "arm_hardware": "robot_rl_sim.ros_arm_node:ArmHardwareConfig",
    "arm_driver": "robot_rl_sim.ros_arm_driver:ArmDriverConfig",
    "arm_controller": "robot_rl_controllers.ros_arm_controller:ArmControllerConfig",
    "arm_safety": "robot_rl_controllers.ros_safety_node:ArmSafetyConfig",
    "car_hardware": "robot_rl_sim.ros_car_node:CarHardwareConfig",
    "drive_controller": "robot_rl_controllers.ros_drive_controller:DriveControllerConfig",
    "car_safety": "robot_rl_controllers.ros_safety_node:CarSafetyConfig",
}


def ros_reference() -> str:
    """The parameters of every ROS 2 node, one table per node."""
    parts = ["# ROS 2 node parameters\n",
             "Generated from the nodes' config dataclasses by `bash scripts/gen_docs.sh`; do not edit. "
             "Every parameter can be set at start-up (`--ros-args -p name:=value`, launch files) and, unless "
             "marked start-up only, at run time (`ros2 param set`).\n"]
    for node, target in ROS_NODES.items():
        cls: Any = import_object(target, "config class")
        parts.append(f"## `{node}`\n\n{markdown_table(cls, tuple(getattr(cls, 'startup_only', ())))}\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``python -m robot_rl.utils.field_docs module:Class [...]``: each class's field table to stdout;
    ``--ros-reference``: the ROS 2 nodes' parameter reference."""
    args = argv if argv is not None else sys.argv[1:]
    if args == ["--ros-reference"]:
        print(ros_reference(), end="")
        return 0
    for target in args:
        cls: Any = import_object(target, "config class")
        print(f"### `{target}`\n\n{markdown_table(cls, tuple(getattr(cls, 'startup_only', ())))}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
