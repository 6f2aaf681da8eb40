"""Memory barriers for the lock-free shared-memory protocol of :mod:`robot_rl.runtime.transport.shm`.

The protocol needs three orderings between processes on different cores:

* producer: the slot's data stores become visible before the store that publishes them (``HEAD``, the weight
  board's even sequence number) - store/store;
* consumer: the load of ``HEAD`` (or of the sequence number) happens before the loads of the data it guards -
  load/load; and the data loads finish before the store that hands the slot back (``TAIL``) - load/store;
* producer: the load of ``TAIL`` happens before the stores that overwrite the slot it freed - load/store.

On x86-64 the hardware guarantees all three (TSO: only a store followed by a load may be reordered, which the
protocol never relies on), and CPython performs each numpy element access as a separate C call, so the compiler
cannot move them across each other: :func:`fence` is a no-op there. On weakly ordered CPUs (aarch64: Jetson, ARM
robot PCs; also ppc64le, riscv64) every one of them can be reordered, so :func:`fence` is a full hardware barrier
(``dmb ish`` on aarch64), emitted by LLVM through numba. A platform that is not x86 and has no working numba
barrier is refused: :func:`require_ordering` raises before any ring or board is made.
"""

from __future__ import annotations

import platform
from collections.abc import Callable

STRONGLY_ORDERED = ("x86_64", "amd64", "i386", "i686", "x86")


def _noop() -> None:
    return None


def hardware_fence() -> Callable[[], None]:
    """A compiled full memory barrier (LLVM ``fence seq_cst``); ``RuntimeError`` if numba cannot provide one."""
    try:
        from numba import njit, types  # lazy: numba (LLVM) loads when a fence is compiled
        from numba.extending import intrinsic  # lazy: numba, as above
    except ImportError as exc:
        raise RuntimeError(f"numba is needed for memory barriers on this CPU ({exc})") from None

    @intrinsic
    def _seq_cst_fence(typingctx):  # noqa: ANN001, ANN202 - numba's intrinsic protocol
        def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
            builder.fence("seq_cst")
            return context.get_dummy_value()
        return types.void(), codegen

    @njit(cache=False, nogil=True)
    def fence_() -> None:
        _seq_cst_fence()

    fence_()  # compile now: a failure here is a refusal, not a crash in the control loop
    return fence_


def select_fence(machine: str | None = None) -> Callable[[], None]:
    """The barrier for CPU ``machine`` (default: this one): a no-op on x86, a hardware fence elsewhere."""
    machine = (machine or platform.machine()).lower()
    if machine in STRONGLY_ORDERED:
        return _noop
    try:
        return hardware_fence()
    except Exception as exc:  # noqa: BLE001 - any failure to build the barrier means no safe ordering
        raise RuntimeError(
            f"robot_rl's shared-memory transport needs memory barriers on this {machine} CPU and could not build "
            f"one ({type(exc).__name__}: {exc}). Install numba for this platform, or run actor and learner with "
            "runtime.transport: ray.") from None


_fence: Callable[[], None] | None = None


def require_ordering() -> Callable[[], None]:
    """The process's barrier, built once; raises ``RuntimeError`` on a platform where ordering cannot be had."""
    global _fence
    if _fence is None:
        _fence = select_fence()
    return _fence


def fence() -> None:
    """A full memory barrier where the CPU needs one (see the module docstring)."""
    (_fence or require_ordering())()
