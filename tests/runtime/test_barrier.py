"""The shared-memory protocol's ordering: no barrier where the CPU orders the accesses (x86-64), a real hardware
barrier where it does not (aarch64: LLVM's fence compiles to ``dmb ish``), and a refusal where none can be had."""

from __future__ import annotations

import pytest

from robot_rl.runtime.transport import barrier


def test_x86_needs_no_barrier_and_weakly_ordered_cpus_get_a_compiled_one() -> None:
    assert barrier.select_fence("x86_64") is barrier._noop
    fence = barrier.select_fence("aarch64")
    assert fence is not barrier._noop
    fence()  # runs here (on x86 LLVM emits a locked instruction, a full barrier too)


def test_the_fence_we_emit_is_dmb_on_aarch64() -> None:
    llvm = pytest.importorskip("llvmlite.binding")
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly("define void @f() {\n  fence seq_cst\n  ret void\n}")
    machine = llvm.Target.from_triple("aarch64-unknown-linux-gnu").create_target_machine()
    assert "dmb\tish" in machine.emit_assembly(module)


def test_a_weakly_ordered_cpu_without_a_barrier_is_refused(monkeypatch) -> None:
    def no_numba() -> None:
        raise RuntimeError("numba is needed for memory barriers on this CPU (no module named 'numba')")
    monkeypatch.setattr(barrier, "hardware_fence", no_numba)
    with pytest.raises(RuntimeError, match="needs memory barriers on this aarch64 CPU"):
        barrier.select_fence("aarch64")
    monkeypatch.setattr(barrier, "_fence", None)
    monkeypatch.setattr(barrier.platform, "machine", lambda: "aarch64")
    from robot_rl.runtime.transport import shm

    with pytest.raises(RuntimeError, match="runtime.transport: ray"):
        shm.ChunkRing("rrl_test_refused", {}, slots=1, rows=1, create=True)
