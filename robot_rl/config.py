"""Config plumbing: dataclasses filled from a YAML file, then overridden from the command line (tyro).

Precedence: dataclass defaults < YAML file < CLI flags. Unknown YAML keys and wrong types are errors that name
the field (``agent.num_critics: expected int, got 'ten'``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import tyro
import yaml
from tyro.constructors import PrimitiveConstructorSpec

T = TypeVar("T")


def _json_arg(kind: type, convert: Callable[[Any], Any] = lambda v: v,
              instance: tuple[type, ...] | None = None) -> PrimitiveConstructorSpec:
    """A config field given on the command line as one JSON value (``--env.kwargs '{"image_size": 64}'``);
    ``convert`` turns the parsed JSON into the field's value, ``instance`` are the types such a value has."""
    def parse(args: list[str]) -> Any:
        try:
            value = json.loads(args[0])
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc}): {args[0]!r}") from None
        if not isinstance(value, kind):
            raise ValueError(f"expected a JSON {'object' if kind is dict else 'list'}, got {args[0]!r}")
        return convert(value)
    return PrimitiveConstructorSpec(nargs=1, metavar="JSON", instance_from_str=parse,
                                    is_instance=lambda v: isinstance(v, instance or (kind,)),
                                    str_from_instance=lambda v: [json.dumps(to_dict(v))])


JsonDict = Annotated[dict[str, Any], _json_arg(dict)]
"""A ``dict[str, Any]`` field: a mapping in YAML, one JSON object on the command line."""


class ConfigError(ValueError):
    """A config value is missing, unknown or of the wrong type; the message names the field."""


def _convert(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if dataclasses.is_dataclass(value) and isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(_concrete(tp, value, where), value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(_convert(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)] if args else list(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {k: _convert(v, args[1], f"{where}.{k}") for k, v in value.items()} if args else dict(value)
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(tp, type) and not isinstance(value, tp) or (tp in (int, float) and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
    return value


def _concrete(tp: type, data: Mapping[str, Any], where: str) -> type:
    """A field typed with a family of configs (``agent: AgentConfig``) takes the member its data names: such a
    base class has ``resolve_config_class(data) -> subclass``."""
    resolve = getattr(tp, "resolve_config_class", None)
    if resolve is None:
        return tp
    try:
        return resolve(data)
    except ValueError as exc:
        raise ConfigError(f"{where}.name: {exc}") from None


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Builds dataclass ``cls`` from nested dicts, checking every key and type."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    retired = getattr(cls, "retired_fields", frozenset())  # e.g. AgentConfig.retired_fields
    data = {k: v for k, v in data.items() if k not in retired}
    unknown = set(data) - set(fields)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ConfigError(f"unknown config field(s) {', '.join(prefix + k for k in sorted(unknown))}; "
                          f"valid: {', '.join(sorted(fields))}")
    kwargs = {k: _convert(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


def to_dict(cfg: Any) -> Any:
    """Dataclass -> plain YAML-safe structure (tuples become lists)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, (list, tuple)):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, dict):
        return {k: to_dict(v) for k, v in cfg.items()}
    return cfg


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A config file's raw mapping (ConfigError when it is missing or not a mapping)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:  # a permission error, a binary file
        raise ConfigError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if not text.strip():
        raise ConfigError(f"{path}: the file is empty")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where} ({getattr(exc, 'problem', None) or exc})") from None
    if data is None:  # only comments
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def load_yaml(cls: type[T], path: str | Path) -> T:
    path = Path(path)
    data = read_yaml(path)
    try:
        prepare = getattr(cls, "prepare_raw", None)  # e.g. paths relative to the file, user modules to import
        return from_dict(cls, prepare(data, path.parent) if prepare else data)
    except (ConfigError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save_yaml(cfg: Any, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))


def replace(cfg: T, changes: Mapping[str, Any]) -> T:
    """A copy of frozen config ``cfg`` with dotted fields changed: ``replace(cfg, {"agent.utd": 2, "seed": 1})``.
    Values are checked like YAML values (``"agent.hidden_dims": [64, 64]`` becomes a tuple)."""
    updates: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    hints = typing.get_type_hints(type(cfg))
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if head not in hints:
            raise ConfigError(f"unknown config field {key!r} of {type(cfg).__name__}")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            updates[head] = _convert(value, hints[head], head)
    for head, sub in nested.items():
        updates[head] = replace(updates.get(head, getattr(cfg, head)), sub)
    return dataclasses.replace(cfg, **updates)  # type: ignore[type-var]


def _choice_override(default: Any, args: list[str]) -> Any:
    """``--agent.name bc`` on the command line: the agent section becomes that agent's defaults (the YAML's
    section belongs to the agent the YAML names), so the flags that follow are that agent's."""
    for field in dataclasses.fields(default):
        value = getattr(default, field.name)
        resolve = getattr(type(value), "resolve_config_class", None)
        flag = f"--{field.name}.name"
        if resolve is None:
            continue
        for i, arg in enumerate(args):
            name = args[i + 1] if arg == flag and i + 1 < len(args) else arg.partition("=")[2] \
                if arg.startswith(flag + "=") else None
            if name is not None and name != value.name:
                try:
                    choice = resolve({"name": name})
                except ValueError as exc:
                    raise ConfigError(f"{field.name}.name: {exc}") from None
                default = dataclasses.replace(default, **{field.name: choice(name=name)})
    return default


def _cli_class(default: Any) -> type:
    """The dataclass tyro parses: fields typed with a config family are re-typed to the member in ``default``
    (tyro builds flags from the annotation, so ``--agent.num-critics`` needs ``agent: SACConfig`` there)."""
    cls = type(default)
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = []
    for f in dataclasses.fields(default):
        value = getattr(default, f.name)
        if hasattr(type(value), "resolve_config_class") and type(value) is not hints[f.name]:
            fields.append((f.name, type(value), dataclasses.field(default_factory=type(value))))
    if not fields:
        return cls
    return dataclasses.make_dataclass(cls.__name__, fields, bases=(cls,), frozen=True)


_LIST_ITEM = re.compile(r"(?:[-*•]|\d+[.)])\s")


def _help_paragraphs(text: str) -> str:
    """A docstring as ``--help`` shows it: each paragraph on one line (the terminal wraps it at its width); blank
    lines, list items and indented lines keep their own lines; reStructuredText's double backticks and roles become
    single backticks."""
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", inspect.cleandoc(text)):
        lines: list[str] = []
        for line in block.splitlines():
            own_line = line[:1].isspace() or _LIST_ITEM.match(line) or (lines and lines[-1][:1].isspace())
            if lines and not own_line:
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.rstrip())
        paragraphs.append("\n".join(lines))
    return _RST_MARKUP.sub(r"`\1`", "\n\n".join(paragraphs).strip())


# ``code`` and :role:`name` in docstrings (the API reference renders them); a terminal shows `code`
_RST_MARKUP = re.compile(r"(?::[a-z]+:)?``?([^`]+?)``?")


@contextlib.contextmanager
def _joined_help_lines() -> Iterator[None]:
    """tyro (1.0) joins a docstring's wrapped lines only when they start with a letter, and dedents after joining,
    so the indented continuation lines of a field docstring would each break the help mid-sentence; while parsing,
    its line joiner is ``_help_paragraphs`` (left as it is where tyro has none)."""
    try:
        strings = importlib.import_module("tyro._strings")
    except ImportError:
        strings = None
    original = getattr(strings, "remove_single_line_breaks", None)
    if original is None:
        yield
        return
    strings.remove_single_line_breaks = _help_paragraphs  # type: ignore[union-attr]
    try:
        yield
    finally:
        strings.remove_single_line_breaks = original  # type: ignore[union-attr]


def parse(cls: type[T], yaml_path: str | Path | None, args: list[str], prog: str = "robot-rl",
          description: str | None = None) -> T:
    """Defaults < YAML < CLI flags (``--agent.utd 10``); ``--help`` lists every field with its docstring."""
    default = load_yaml(cls, yaml_path) if yaml_path else cls()
    default = _choice_override(default, args)
    with _joined_help_lines():
        return tyro.cli(_cli_class(default), default=default, args=args, prog=prog, description=description)


def parse_command(cls: type[T], argv: list[str], prog: str, description: str | None = None) -> T:
    """The one parser of every ``robot-rl`` subcommand: its options are the fields of dataclass ``cls`` (each with
    a docstring, shown by ``--help``); bad options exit with code 2 and a message naming them."""
    with _joined_help_lines():
        return tyro.cli(cls, args=argv, prog=prog, description=description or inspect.getdoc(cls))


def parse_action(command: str, actions: dict[str, type], usage: str, argv: list[str]) -> tuple[str, object] | int:
    """``robot-rl COMMAND ACTION ...``: one parser per action (:func:`parse_command` over its dataclass), picked by
    the first word; the parsed args, or an exit code (usage shown: 0 when asked for, else 2; an unknown action: 2,
    with the line every command fails with)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    action, rest = argv[0], argv[1:]
    if action not in actions:
        print(f"robot-rl {command}: error: unknown action {action!r} (choose from {', '.join(actions)})",
              file=sys.stderr, flush=True)
        return 2
    return action, parse_command(actions[action], rest, prog=f"robot-rl {command} {action}")
