"""Shared-memory segments that outlive their creator: the run's processes unlink them explicitly."""

from __future__ import annotations

import _posixshmem
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

ALIGN = 64


def open_shm(name: str, size: int = 0, create: bool = False) -> shared_memory.SharedMemory:
    """Creates or attaches a segment that outlives its creator: the run's processes unlink it explicitly.

    (Python's resource tracker would otherwise unlink it when *any* process that touched it exits, which is
    exactly wrong when an actor dies and the learner still has chunks to drain.)"""
    if create:
        try:  # a leftover of a crashed earlier run with the same name
            old = shared_memory.SharedMemory(name=name)
            old.close()
            old.unlink()
        except FileNotFoundError:
            pass
    try:
        shm = shared_memory.SharedMemory(name=name, create=create, size=size)
    except ValueError:  # "cannot mmap an empty file": its creator has made it and not yet sized it
        if create:
            raise
        raise FileNotFoundError(f"shared-memory segment {name} is being created") from None
    try:
        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - tracker absent or already unregistered
        pass
    return shm


def unlink_shm(name: str) -> None:
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    except ValueError:  # an empty segment (its creator died between making and sizing it) cannot be mapped
        try:
            _posixshmem.shm_unlink("/" + name)
        except FileNotFoundError:
            pass
        return
    shm.close()
    shm.unlink()  # also drops the registration that attaching made


def unlink_run_shm(key: str) -> list[str]:
    """Unlinks every segment named ``rrl_<key>_*`` (a run folder's board and rings) left by processes that died
    without cleaning up; only for a run no process can be using (a new run in a folder that held none). Linux:
    the segments are files in /dev/shm; elsewhere nothing is found. Returns the names."""
    names = [p.name for p in Path("/dev/shm").glob(f"rrl_{key}_*")]
    for name in names:
        unlink_shm(name)
    return names
