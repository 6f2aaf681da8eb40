"""Loading user code named in a config: ``module:attr`` references and ``imports`` entries (module names or
``.py`` files). Works in every process of a run, from any working directory, because file paths are made
absolute once (:func:`absolute_imports`) before the run's config is written."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def import_object(ref: str, what: str = "object") -> Any:
    """``"package.module:Name"`` (or ``"package.module:Outer.Inner"``) -> the object. ``ValueError`` otherwise."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what} {ref!r} is not of the form 'module:Name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{what} {ref!r}: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{what} {ref!r}: module {module_name!r} has no {attr!r}") from None
    return obj


def is_file_entry(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry


def absolute_imports(entries: Iterable[str], base: str | Path) -> list[str]:
    """File entries made absolute against ``base`` (the config file's folder, or the working directory)."""
    return [str((Path(base) / e).resolve()) if is_file_entry(e) else e for e in entries]


def load_imports(entries: Iterable[str], field: str = "imports") -> None:
    """Imports each entry once: a module name, or a ``.py`` file (imported as a module named after the file, with
    its folder put on ``sys.path`` so ``that_module:Name`` references and its sibling modules resolve)."""
    for i, entry in enumerate(entries):
        where = f"{field}[{i}]"
        if not is_file_entry(entry):
            try:
                importlib.import_module(entry)
            except ImportError as exc:
                raise ValueError(f"{where}: cannot import module {entry!r} ({exc})") from None
            continue
        path = Path(entry)
        if not path.is_file():
            raise ValueError(f"{where}: no such file {entry!r}")
        folder, name = str(path.resolve().parent), path.stem
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loaded = sys.modules.get(name)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path.resolve():
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"{where}: {entry!r} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module failed: say where
            del sys.modules[name]
            raise ValueError(f"{where}: importing {entry!r} failed: {type(exc).__name__}: {exc}") from exc
