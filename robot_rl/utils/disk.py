"""A full disk, told apart from other I/O errors: what a process that hits one reports, and how it exits."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DISK_FULL = 3
"""Exit code of a learner or actor that stopped because a write found no space: the supervisor ends the run with
one message instead of restarting (a restart would fail the same way)."""

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""No space left, quota exceeded, file-size limit (``ulimit -f``) reached."""


_RUST_IO = re.compile(r"os error (\d+)")
"""How safetensors (Rust) reports an OS error: in its message, not as an OSError."""


def disk_full_error(exc: BaseException | None) -> OSError | None:
    """The full-disk error in ``exc``'s chain (it may be wrapped by zarr, safetensors or a writer thread) as an
    OSError, or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return exc
        match = _RUST_IO.search(str(exc))
        if match and int(match.group(1)) in FULL_ERRNOS:
            code = int(match.group(1))
            return OSError(code, os.strerror(code))
        exc = exc.__cause__ or exc.__context__
    return None


def describe(err: OSError) -> str:
    """``'<file>: No space left on device'``."""
    where = err.filename or "a file (the error did not say which)"
    return f"{where}: {err.strerror or err}"


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """A full-disk error inside carries ``path`` as its file name (a ``write`` or a library that failed on a full
    disk rarely says which file it was writing), so the message names it."""
    try:
        yield
    except Exception as exc:
        err = disk_full_error(exc)
        if err is None or err.filename:
            raise
        raise OSError(err.errno, err.strerror, str(path)) from exc
