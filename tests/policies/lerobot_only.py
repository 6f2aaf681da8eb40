"""A LeRobot-only environment carved out of the current one: a child interpreter (``python -S``, only the standard
library and this environment's site-packages on its path) whose import system finds only the top-level modules of
the distributions LeRobot needs (its requirements, followed transitively), the wire's two (msgpack, websockets)
and robot_rl's own package. Anything else is absent there exactly as if it were not installed (``import`` raises
ModuleNotFoundError, ``importlib.util.find_spec`` answers None)."""

from __future__ import annotations

import importlib.metadata as md
import json
import site
import sys
from pathlib import Path

WIRE = ("msgpack", "websockets")

FILTER = """
import importlib.machinery, json, sys
allowed = set(json.load(open({allowed!r})))
sys.path[:0] = {paths!r}
class OnlyAllowed(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        spec = super().find_spec(name, path, target)
        if path is None and name not in allowed and spec is not None and "-packages" in str(spec.origin):
            return None  # an installed distribution LeRobot does not need: absent here (the stdlib stays)
        return spec
sys.meta_path[:] = [OnlyAllowed if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def requirement_closure(root: str, extras: tuple[str, ...] = ()) -> set[str]:
    """Distribution names ``root[extras]`` needs on this platform, itself included."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, set[str]] = {}  # distribution -> its extras followed ("" = its plain requirements)
    todo = [Requirement(f"{root}[{','.join(extras)}]" if extras else root)]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        new = {"", *req.extras} - seen.get(name, set())
        if not new:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen.setdefault(name, set()).update(new)
        for text in dist.requires or []:  # an extra may name the distribution itself (lerobot[diffusers-dep])
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in new):
                todo.append(sub)
    return set(seen)


def allowed_modules(extras: tuple[str, ...] = ()) -> list[str]:
    """Top-level module names of ``lerobot[extras]``'s closure, the wire's packages and robot_rl."""
    from packaging.utils import canonicalize_name

    wanted = requirement_closure("lerobot", extras) | set(WIRE)
    names = {m for m, dists in md.packages_distributions().items()
             if any(canonicalize_name(d) in wanted for d in dists)}
    return sorted(names | {"robot_rl"})


def isolated_python(folder: Path, module: str, extras: tuple[str, ...] = ()) -> list[str]:
    """A command that runs ``python -m module ARGS...`` (append the args) in the LeRobot-only view."""
    folder.mkdir(parents=True, exist_ok=True)
    allowed = folder / "allowed.json"
    allowed.write_text(json.dumps(allowed_modules(extras)))
    repo = str(Path(__file__).resolve().parents[2])  # robot_rl's package (an editable install's source)
    code = FILTER.format(allowed=str(allowed), paths=[repo, *site.getsitepackages()])
    return [sys.executable, "-S", "-c", code + f"import runpy; sys.argv[0] = {module!r}; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"]
