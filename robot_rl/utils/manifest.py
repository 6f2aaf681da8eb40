"""A folder's manifest: the size and SHA-256 of every file in it, written last, so a reader can tell a complete,
intact folder (a checkpoint) from one a disk error, a cut copy or a hand edit damaged, and name the damaged file."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from robot_rl.utils.state_io import atomic_write

MANIFEST = "manifest.json"
"""The manifest's file name inside the folder it describes."""

_BLOCK = 1 << 20


def _files(folder: Path) -> list[str]:
    """Every file under ``folder`` but the manifest, as sorted POSIX paths relative to it."""
    out = []
    for root, _, names in os.walk(folder):
        for name in names:
            rel = Path(root, name).relative_to(folder).as_posix()
            if rel != MANIFEST:
                out.append(rel)
    return sorted(out)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: str | Path) -> None:
    """Records every file of ``folder`` (size, SHA-256) in ``folder/manifest.json``, atomically: call it last."""
    folder = Path(folder)
    files = {rel: {"size": (folder / rel).stat().st_size, "sha256": _sha256(folder / rel)} for rel in _files(folder)}
    atomic_write(folder / MANIFEST, lambda f: f.write_text(json.dumps({"files": files}, indent=1)))


def manifest_problem(folder: str | Path, checksums: bool = True) -> str | None:
    """What is wrong with ``folder`` against its manifest (a missing, truncated, changed or extra file, or the
    manifest itself), naming the file; None when every file is as written. ``checksums=False`` checks sizes only
    (cheap: no file is read)."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        return f"{MANIFEST} is missing (the checkpoint was not finished, or was written before checkpoints had one)"
    try:
        files = json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{MANIFEST} cannot be read ({exc})"
    for rel, want in files.items():
        file = folder / rel
        try:
            size = file.stat().st_size
        except FileNotFoundError:
            return f"{rel} is missing"
        except OSError as exc:
            return f"{rel} cannot be read ({exc.strerror or exc})"
        if size != want["size"]:
            return f"{rel} has {size} bytes where {want['size']} were written" + (" (empty)" if size == 0 else "")
    if checksums:
        for rel, want in files.items():
            try:
                if _sha256(folder / rel) != want["sha256"]:
                    return f"{rel} differs from what was written (checksum mismatch)"
            except OSError as exc:
                return f"{rel} cannot be read ({exc.strerror or exc})"
    return None
