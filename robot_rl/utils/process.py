"""Small process helpers shared by the runtime and the dataset tools."""

from __future__ import annotations

import ctypes
import os
import signal
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


def reset_niceness(what: str) -> bool:
    """Back to niceness 0 for this process (Ray starts its worker processes at nice 15: an actor's control loop
    or the gateway at that niceness gets almost no CPU beside any busy process). Where refused (lowering
    niceness needs root, CAP_SYS_NICE or an RLIMIT_NICE): a warning naming ``what`` and False."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        return True
    except (PermissionError, OSError) as err:
        warnings.warn(f"{what}: could not lower the niceness Ray started this worker with ({err}); it runs behind "
                      "every busy process (start Ray with RAY_worker_niceness=0, or allow RLIMIT_NICE)",
                      RuntimeWarning, stacklevel=2)
        return False


PARENT_ENV = "ROBOT_RL_SUPERVISOR_PID"
"""Set by a supervisor in the environment of the processes it starts: the pid they must not outlive."""


def supervised() -> bool:
    """Whether a supervisor started this process (``ROBOT_RL_SUPERVISOR_PID`` set)."""
    return int(os.environ.get(PARENT_ENV, "0") or 0) > 0


def on_stop_signals(handler: object) -> None:
    """SIGTERM and SIGHUP call ``handler``, and so does SIGINT (Ctrl-C) in a process run alone. A process a supervisor
    started ignores SIGINT: a terminal sends Ctrl-C to the whole process group, and the supervisor stops its
    children in order (actors first, then the learner) with SIGTERM."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)  # type: ignore[arg-type]
    signal.signal(signal.SIGINT, signal.SIG_IGN if supervised() else handler)  # type: ignore[arg-type]


def exit_on_signal(signum: int, _frame: object) -> None:
    """A stop-signal handler: exit with 128 + the signal's number, ignoring the stop signals that follow (a second
    Ctrl-C must not interrupt the clean-up with a traceback)."""
    ignore_stop_signals()
    raise SystemExit(128 + signum)


def ignore_stop_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP ignored from here on (a process on its way out: what runs at exit is not cut
    short by a signal, with a traceback)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def die_with_parent() -> None:
    """Called at a child's own start-up (not in ``preexec_fn``, which can deadlock a child forked while the parent
    runs threads): with ``ROBOT_RL_SUPERVISOR_PID`` set, the child gets SIGTERM when that parent dies, however it
    dies (Linux ``PR_SET_PDEATHSIG``), and exits at once if the parent is already gone."""
    parent = int(os.environ.get(PARENT_ENV, "0") or 0)
    if parent <= 0:
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != parent:  # the parent died before the request above took effect
        raise SystemExit(128 + signal.SIGTERM)
