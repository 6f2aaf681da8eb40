"""The install sizes the README and Getting started state are what the set-up installs: the ``main`` set-up (the
project's own dependencies: what ``scripts/train.sh`` installs) and the full one (``scripts/test.sh``: every extra
and the test tools), summed from the installed distributions' own file records in this ``.venv``."""

from __future__ import annotations

import importlib.metadata as md
import re
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/getting-started.md")
TOLERANCE = 0.10


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed() -> dict[str, md.Distribution]:
    return {_key(d.metadata["Name"]): d for d in md.distributions()}


def _bytes(dist: md.Distribution) -> int:
    total = 0
    for f in dist.files or []:
        try:
            total += f.locate().stat().st_size
        except OSError:  # a record of a file since removed (a cache)
            pass
    return total


def _closure(name: str, dists: dict[str, md.Distribution], extras: tuple[str, ...] = (),
             seen: set[str] | None = None) -> set[str]:
    """``name`` and everything it requires (with ``extras``), as installed."""
    seen = set() if seen is None else seen
    seen.add(_key(name))
    for line in dists[_key(name)].requires or []:
        req = Requirement(line)
        wanted = req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras))
        if wanted and _key(req.name) in dists and _key(req.name) not in seen:
            _closure(req.name, dists, tuple(req.extras), seen)
    return seen


def _stated(pattern: str) -> list[float]:
    return [float(m) for page in PAGES for m in re.findall(pattern, (ROOT / page).read_text())]


def test_the_stated_install_sizes_are_what_the_set_up_installs() -> None:
    dists = _installed()
    main = sum(_bytes(dists[k]) for k in _closure("robot-rl", dists)) / 1e9
    full = sum(_bytes(d) for d in dists.values()) / 1e9
    said_main = _stated(r"(\d+\.\d) GB(?: venv|,| `\.venv/`)")
    said_full = _stated(r"(\d+\.\d) GB in all")
    assert len(said_main) == 3 and len(said_full) == 2, (said_main, said_full)
    assert all(abs(s - main) <= TOLERANCE * main for s in said_main), f"main set-up: {main:.2f} GB, pages: {said_main}"
    assert all(abs(s - full) <= TOLERANCE * full for s in said_full), f"full set-up: {full:.2f} GB, pages: {said_full}"
