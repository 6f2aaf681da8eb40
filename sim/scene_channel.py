"""What a person beside the robot sees and does, for a rehearsal against the emulated driver in bare mode: a folder
shared by the driver and a scripted person, off the ROS graph (a real robot has no topic for the cube's pose or the
task's success; a person looks at the scene).

The driver (:class:`SceneChannel`) writes ``seen.json`` about 20 times a second: the task's success as the sim
judges it, the object and tool positions (base frame), the arm's joints, the gripper's opening and whether the
object is in the hand. The person (:class:`ScenePerson`) asks
for what a person's hands do by writing request files under ``requests/``, which the physics loop takes in order:

* ``{"do": "reset"}`` — put the task objects back (a new placement), as between episodes;
* ``{"do": "move_arm", "joints": [...], "seconds": s}`` — guide the arm by hand to these joint positions (the
  profile's joint order) over ``s`` seconds; the driver holds the arm there afterwards, as after freedrive;
* ``{"do": "pause_state", "seconds": s}`` — the driver's state streams (joint states, TF) pause for ``s`` seconds
  (a stalled driver), the physics going on;
* ``{"do": "clock_jump", "seconds": s}`` — the driver host's clock steps by ``s`` seconds (an NTP step): every
  stamp after it.

Files are written under a temporary name and renamed, so neither side reads a half-written one.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

SEEN = "seen.json"
REQUESTS = "requests"


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class SceneChannel:
    """The driver's side: :meth:`show` what is seen, :meth:`take` the person's requests (oldest first)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        (self.folder / REQUESTS).mkdir(parents=True, exist_ok=True)

    def show(self, seen: dict[str, Any]) -> None:
        _write(self.folder / SEEN, seen)

    def take(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.folder / REQUESTS).glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue  # not complete yet (a writer renames when done): taken next time
            path.unlink(missing_ok=True)
        return out


class ScenePerson:
    """The person's side: :meth:`seen` reads the scene, :meth:`ask` requests what hands do."""

    _count = itertools.count()

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        (self.folder / REQUESTS).mkdir(parents=True, exist_ok=True)

    def seen(self, timeout: float = 10.0) -> dict[str, Any]:
        """The newest scene (waits up to ``timeout`` s for the driver's first)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return json.loads((self.folder / SEEN).read_text())
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no scene in {self.folder} within {timeout} s (is the driver's scene_dir "
                                       "this folder?)") from None
                time.sleep(0.02)

    def ask(self, do: str, **args: Any) -> None:
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._count):06d}.json"
        _write(self.folder / REQUESTS / name, {"do": do, **args})
