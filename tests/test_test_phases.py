"""scripts/test.sh runs the suite in two phases (ROBOT_RL_TEST_PHASE, tests/conftest.py): every test runs in
exactly one of them, and the serial phase holds the tests that measure an arm's motion or start their own load."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/ros/test_bare_driver.py", "tests/ros/test_safety.py", "tests/test_layering.py"]


def collected(phase: str | None) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_RL_TEST_PHASE"}
    if phase:
        env["ROBOT_RL_TEST_PHASE"] = phase
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *FILES],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_every_test_runs_in_exactly_one_phase_and_the_motion_tests_run_alone() -> None:
    every, parallel, serial = collected(None), collected("parallel"), collected("serial")
    assert parallel | serial == every and not parallel & serial
    assert any("test_nothing_moves_that_nobody_asked_for" in t for t in serial), serial
    assert any("test_watchdog_stops_the_arm" in t for t in serial), serial
    assert not any("test_layering" in t for t in serial) and any("test_layering" in t for t in parallel)


def test_a_test_that_starts_its_own_cpu_hogs_runs_alone() -> None:
    """Its hogs are the load it is measured under; a test on the other xdist worker would add to it (a sim-time
    test failed so on two workers)."""
    unmarked = []
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            calls = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            marks = {ast.unparse(d) for d in node.decorator_list}
            if "cpu_hogs" in calls and "pytest.mark.serial" not in marks:
                unmarked.append(f"{path.relative_to(ROOT)}::{node.name}")
    assert not unmarked, unmarked
