"""The actors' write-ahead log of chunks: ``<run>/spool/<actor uid>/<seq>.safetensors``.

Every chunk an actor sends is also written here (on a background thread, off the control loop). The learner
reads a chunk from the spool when the ring dropped it (learner slow or down) or after a restart, and deletes
chunk files once every kept checkpoint holds them. So a learner crash loses no transition: what the last
checkpoint lacks is still in the spool, and so is what an older kept checkpoint lacks (a resume falls back to one
when the newest is damaged). The learner marks what the newest checkpoint holds (``checkpointed``): the spool's
bound (``runtime.spool_max_mb``) counts only the chunks after it. Files are written under a temporary name and
renamed, so a reader never sees a half-written chunk; safetensors means nothing is unpickled.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from robot_rl.utils.failpoint import failpoint
from robot_rl.utils.state_io import atomic_write

RECOUNT_S = 1.0
"""How often the writer thread recounts the spool folder's bytes."""
CHECKPOINTED = "checkpointed"
"""The file in an actor's spool folder naming the last chunk the newest checkpoint holds (written by the
learner)."""


def spool_file(directory: Path, seq: int) -> Path:
    return directory / f"{seq:012d}.safetensors"


class SpoolWriter:
    """Writes chunks of one actor in order on a daemon thread. ``write`` copies the arrays and returns at once."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._queue: queue.Queue[tuple[int, dict[str, np.ndarray]] | None] = queue.Queue()
        self.error: BaseException | None = None
        self.nbytes = pending_bytes(self.directory)
        """Bytes of the chunks no checkpoint holds yet: grown by each write and recounted by the writer thread at
        least once a second (a checkpoint marks and the learner deletes what it holds), so the control loop only
        reads a number."""
        self._counted = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="spool-writer", daemon=True)
        self._thread.start()

    def write(self, seq: int, chunk: Mapping[str, np.ndarray]) -> None:
        if self.error is not None:
            raise RuntimeError(f"spool writer failed: {self.error}") from self.error
        self._queue.put((seq, {k: np.ascontiguousarray(v).copy() for k, v in chunk.items()}))

    def _run(self) -> None:
        while True:
            if time.monotonic() - self._counted > RECOUNT_S:
                self.nbytes, self._counted = pending_bytes(self.directory), time.monotonic()
            try:
                item = self._queue.get(timeout=RECOUNT_S)
            except queue.Empty:
                continue  # idle (a held actor writes nothing): still recount
            if item is None:
                return
            seq, chunk = item
            final = spool_file(self.directory, seq)
            try:  # fsynced: a chunk on disk survives a power loss, not only a killed process
                atomic_write(final, lambda tmp, chunk=chunk: save_file(chunk, str(tmp)))
                self.nbytes += final.stat().st_size
            except BaseException as exc:  # noqa: BLE001 - reported to the actor on its next write
                self.error = exc  # nothing torn stays behind (atomic_write removes its temporary file)
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Blocks until every queued chunk is on disk."""
        self._queue.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)


def pending_bytes(directory: Path) -> int:
    """Bytes of the chunk files in ``directory`` after the last one the newest checkpoint holds (files being
    written count; files removed meanwhile are skipped; no folder: 0)."""
    held = checkpointed_seq(directory)
    total = 0
    if not directory.is_dir():
        return 0
    with os.scandir(directory) as entries:
        for entry in entries:
            seq = entry.name.split(".")[0]
            if entry.name == CHECKPOINTED or (seq.isdigit() and entry.name.endswith(".safetensors")
                                              and int(seq) <= held):
                continue
            try:
                total += entry.stat().st_size
            except FileNotFoundError:
                pass
    return total


def mark_checkpointed(directory: str | Path, upto_seq: int) -> None:
    """Records that the newest checkpoint holds the chunks up to ``upto_seq`` (they stop counting against the
    spool's bound; they are deleted once every kept checkpoint holds them)."""
    directory = Path(directory)
    if directory.is_dir():
        atomic_write(directory / CHECKPOINTED, lambda tmp: tmp.write_text(str(int(upto_seq))))


def checkpointed_seq(directory: str | Path) -> int:
    """The last chunk the newest checkpoint holds (-1: none marked)."""
    try:
        return int((Path(directory) / CHECKPOINTED).read_text())
    except (OSError, ValueError):
        return -1


def read_chunk(directory: str | Path, seq: int) -> dict[str, np.ndarray] | None:
    path = spool_file(Path(directory), seq)
    if not path.is_file():
        return None
    return load_file(str(path))


def has_chunks(directory: str | Path) -> bool:
    """Whether ``directory`` holds a chunk file (stops at the first; no folder: False)."""
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith(".safetensors") and e.name[0].isdigit() for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def spooled_seqs(directory: str | Path) -> list[int]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.safetensors"))


def trim(directory: str | Path, upto_seq: int) -> int:
    """Deletes chunk files with ``seq <= upto_seq``; returns how many."""
    removed = 0
    for seq in spooled_seqs(directory):
        if seq > upto_seq:
            break
        spool_file(Path(directory), seq).unlink(missing_ok=True)
        removed += 1
        failpoint("spool.trim")
    return removed
