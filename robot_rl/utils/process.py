"""Small process helpers shared by the runtime and the dataset tools."""

from __future__ import annotations

import os
import warnings


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (pid 0 or less: no)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def set_realtime(priority: int, what: str = "rt_priority") -> bool:
    """SCHED_FIFO at ``priority`` for the calling thread and the threads it starts afterwards (other threads
    keep their scheduling). Where refused (needs root, CAP_SYS_NICE or an rtprio limit): a warning naming
    ``what`` and False."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except (PermissionError, AttributeError, OSError) as err:
        warnings.warn(f"{what} {priority}: real-time scheduling refused ({err}); running with normal scheduling",
                      RuntimeWarning, stacklevel=2)
        return False
