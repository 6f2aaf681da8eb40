"""A LeRobot-only environment carved out of the current one: a folder of links to the installed distributions
LeRobot needs (its requirements, followed transitively) plus the wire's two (msgpack, websockets) and robot_rl's
own package, for a ``python -S`` child whose ``sys.path`` is only the standard library and that folder. What is not
linked is absent there, as it would be in an environment where only lerobot was installed."""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
from pathlib import Path

import robot_rl

WIRE = ("msgpack", "websockets")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(root: str) -> set[str]:
    """Distribution names ``root`` needs, itself included (extras' requirements left out)."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = _norm(re.split(r"[ ;<>=!~\[(]", todo.pop().strip(), maxsplit=1)[0])
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen.add(name)
        todo += [req for req in dist.requires or [] if "extra ==" not in req]
    return seen


def lerobot_only_site(folder: Path) -> Path:
    """Links the top-level entries (packages, modules, .libs, .dist-info) of LeRobot's closure + the wire into
    ``folder``, and robot_rl's package; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in requirement_closure("lerobot") | set(WIRE):
        dist = md.distribution(name)
        base = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            source = base / top
            if top not in ("..", "robot_rl") and source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)
    (folder / "robot_rl").symlink_to(Path(robot_rl.__file__).parent)
    return folder


def isolated_python(site: Path) -> list[str]:
    """A command prefix: this interpreter without site-packages, with only ``site`` on its path."""
    return [sys.executable, "-S", "-c", f"import sys, runpy; sys.path.insert(0, {str(site)!r}); "
            "sys.argv[0] = 'serve'; runpy.run_module('robot_rl.policies.serve', run_name='__main__')"]
