"""Publishing a recording atomically: it is written under a temporary name beside the target (``.<name>.tmp-<host>-
<pid>-<token>``), flushed, and renamed into place when complete, so a crash never leaves a half dataset at the
target path; temporary folders of dead processes on this host are removed by the next recording."""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from pathlib import Path

from robot_rl.utils.process import pid_alive
from robot_rl.utils.state_io import fsync_tree


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def temp_prefix(out: Path) -> str:
    return f".{out.name}.tmp-"


def temp_path(out: Path) -> Path:
    """A fresh temporary path beside ``out`` that names this host and process."""
    return out.with_name(f"{temp_prefix(out)}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove_stale_temps(out: str | Path) -> list[Path]:
    """Deletes temporary folders of ``out`` left by recordings on this host whose process is gone."""
    out = Path(out)
    removed: list[Path] = []
    if not out.parent.is_dir():
        return removed
    host = socket.gethostname()
    for tmp in out.parent.glob(temp_prefix(out) + "*"):
        parts = tmp.name[len(temp_prefix(out)):].rsplit("-", 2)  # <host>-<pid>-<token>
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue  # another host's (or a foreign) folder: leave it alone
        if int(parts[1]) != os.getpid() and not pid_alive(int(parts[1])):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def publish(tmp: Path, out: Path, overwrite: bool) -> None:
    """Renames the finished ``tmp`` to ``out`` (replacing it only with ``overwrite``) and syncs the folder."""
    fsync_tree(tmp)
    old = None
    if overwrite and out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        os.replace(out, old)
    try:
        os.rename(tmp, out)
    except OSError as exc:
        if old is not None:
            os.replace(old, out)
        raise FileExistsError(f"{out} appeared while recording (another process?): {exc}") from exc
    dir_fd = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
