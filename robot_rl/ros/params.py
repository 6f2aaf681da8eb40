"""A config dataclass as ROS 2 parameters: every field (nested dataclasses as ``prefix.field``) is declared with
its default, its type (a float field is a double parameter: an integer given on the command line or in a launch file
is read as a double, one set at run time is refused with rclpy's type message) and its docstring as the description,
read back with any ``--ros-args -p`` / launch-file override, and kept in sync when set at run time (``ros2 param
set``), so all gains and limits are tunable the ROS 2 way. An array of the wrong length is refused naming the
parameter."""

from __future__ import annotations

import array
import dataclasses
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor, ParameterType, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_rl.utils.field_docs import field_docstrings


def _flatten(cfg: Any, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """``{param name: (value, the field's docstring)}`` of a dataclass, nested dataclasses flattened with dots."""
    out: dict[str, tuple[Any, str]] = {}
    docs = field_docstrings(type(cfg))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = (value, docs.get(f.name, ""))
    return out


def _ros_type(value: Any) -> int:
    """The ROS parameter type of a dataclass default."""
    T = ParameterType  # noqa: N806
    if isinstance(value, bool):
        return T.PARAMETER_BOOL
    if isinstance(value, int):
        return T.PARAMETER_INTEGER
    if isinstance(value, float):
        return T.PARAMETER_DOUBLE
    if isinstance(value, str):
        return T.PARAMETER_STRING
    if isinstance(value, tuple) and value:
        first = value[0]
        if isinstance(first, bool):
            return T.PARAMETER_BOOL_ARRAY
        if isinstance(first, float | int):
            return T.PARAMETER_DOUBLE_ARRAY
        return T.PARAMETER_STRING_ARRAY
    return T.PARAMETER_NOT_SET


def _to_ros(value: Any) -> Any:
    if isinstance(value, tuple):
        return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def _coerce(value: Any, like: Any, name: str = "") -> Any:
    """A parameter value converted to the type of the dataclass default ``like`` (ints given for floats etc.); an
    array of another length than the default's is refused (``ValueError`` naming the parameter)."""
    if isinstance(like, bool):
        return bool(value)
    if isinstance(like, float):
        return float(value)
    if isinstance(like, int):
        return int(value)
    if isinstance(like, tuple):
        # rclpy hands array parameters as array.array (doubles, integers) or lists (strings, booleans)
        seq = list(value) if isinstance(value, list | tuple | array.array) else [value]
        fixed = len(like) > 1 and isinstance(like[0], float | int) and not isinstance(like[0], bool)
        if fixed and len(seq) != len(like):
            raise ValueError(f"{name}: needs {len(like)} values, got {len(seq)}")
        if len(like) and isinstance(like[0], float | int) and not isinstance(like[0], bool):
            return tuple(float(v) for v in seq)
        return tuple(seq)
    return value


def _set(cfg: Any, dotted: str, value: Any) -> None:
    obj, parts = cfg, dotted.split(".")
    for p in parts[:-1]:
        obj = getattr(obj, p)
    setattr(obj, parts[-1], value)


def _get(cfg: Any, dotted: str) -> Any:
    obj = cfg
    for p in dotted.split("."):
        obj = getattr(obj, p)
    return obj


def declare_config(node: Node, cfg: Any, on_change: Any = None) -> Any:
    """Declares every field of the dataclass ``cfg`` as a parameter of ``node`` (defaults from ``cfg``), writes the
    effective values (overrides included) into ``cfg`` and returns it. Later ``set_parameters`` calls update
    ``cfg`` in place after ``cfg.validate()`` (if any) accepts them; ``on_change(cfg)`` runs after each change.
    Fields the config class lists in ``startup_only`` (dotted names) are read-only parameters: they take effect at
    start-up only, so a later set is refused with that reason instead of being accepted and ignored."""
    flat = _flatten(cfg)
    startup = set(getattr(type(cfg), "startup_only", ()))
    overrides = getattr(node, "_parameter_overrides", {})  # rclpy keeps --ros-args -p values here until declared
    for name, (value, doc) in flat.items():
        kind = _ros_type(value)
        given = overrides.get(name)
        if given is not None and given.type_ in (given.Type.INTEGER, given.Type.INTEGER_ARRAY) and \
                kind in (ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_DOUBLE_ARRAY):
            number = given.value
            overrides[name] = Parameter(name, value=float(number) if kind == ParameterType.PARAMETER_DOUBLE
                                        else [float(v) for v in number])  # 400 for a double: read as 400.0
        note = "start-up only (set it with --ros-args -p or in the launch file)" if name in startup else ""
        desc = ParameterDescriptor(type=kind, dynamic_typing=kind == ParameterType.PARAMETER_NOT_SET,
                                   read_only=name in startup, description=" ".join(x for x in (doc, note) if x))
        param = node.declare_parameter(name, _to_ros(value), desc)
        _set(cfg, name, _coerce(param.value, value, name))
    if hasattr(cfg, "validate"):
        cfg.validate()

    def callback(params: list) -> SetParametersResult:
        trial = dataclasses.replace(cfg) if not any("." in p.name for p in params) else None
        target = trial if trial is not None else cfg
        old = {p.name: _get(cfg, p.name) for p in params if p.name in flat}
        try:
            for p in params:
                if p.name in flat:
                    _set(target, p.name, _coerce(p.value, flat[p.name][0], p.name))
            if hasattr(target, "validate"):
                target.validate()
        except (ValueError, TypeError) as exc:
            for name, value in old.items():
                _set(cfg, name, value)
            return SetParametersResult(successful=False, reason=str(exc))
        if trial is not None:
            for f in dataclasses.fields(cfg):
                setattr(cfg, f.name, getattr(trial, f.name))
        if on_change is not None:
            on_change(cfg)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(callback)
    return cfg


def set_config_values(node: Node, value: Any, prefix: str) -> None:
    """Sets the declared parameters ``<prefix>.<field>`` of ``node`` to the fields of dataclass ``value`` (through
    the node's own set-parameters path, so the config the node reads and ``ros2 param get`` agree)."""
    params = [Parameter(name, value=_to_ros(v)) for name, (v, _) in _flatten(value, prefix + ".").items()]
    results = node.set_parameters(params)
    failed = [r.reason for r in results if not r.successful]
    if failed:
        raise ValueError(f"{prefix}: {failed[0]}")
