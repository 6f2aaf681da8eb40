"""Fixtures for the ROS 2 tests: every test gets its own ROS_DOMAIN_ID (set for this process too, before any
rclpy context is made) and localhost-only discovery; node processes are stopped at the end of the test."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (pip install -e '.[ros2]')")

from tests.ros.graph import Graph  # noqa: E402

ARM_NODES = ("arm_hardware", "arm_controller", "arm_safety")


@pytest.fixture
def graph(domain: int, tmp_path):
    g = Graph(domain, tmp_path)
    yield g
    codes = g.stop()
    # A clean stop: exit code 0 (or SIGINT) and no traceback on the way (e.g. a thread using a destroyed handle).
    bad = {n: c for n, c in codes.items() if c not in (0, -2) or "Traceback" in g.log(n)}
    assert not bad, f"node processes exited badly: {bad}\n" + "\n".join(f"--- {n}\n{g.log(n)[-2000:]}" for n in bad)


def wait_ready(graph: Graph, hardware: str, safety: str, timeout: float = 90.0) -> None:
    """Until the hardware reports effort commands arriving (controller up) and the safety node its state."""
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import String

    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import diagnostics_by_node

    link = RosLink("ready_probe")
    try:
        link.subscribe("diag", DiagnosticArray, "/diagnostics",
                       diagnostics_by_node)
        link.subscribe("state", String, "safety_state", lambda m: m.data, stamped=False, latched=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert all(graph.alive().values()), {n: graph.log(n)[-2000:] for n in graph.procs}
            diag = [v[hardware] for _, v in list(link.streams["diag"].items) if hardware in v]
            if diag and float(diag[-1].get("effort_rate_hz", 0)) > 50 and link.streams["state"].latest():
                return
            time.sleep(0.1)
        raise TimeoutError(f"graph not ready in {timeout} s")
    finally:
        link.close()


@pytest.fixture(params=["separate", "stack"])
def arm_graph(graph: Graph, request: pytest.FixtureRequest) -> Graph:
    """Sim PickCube hardware + impedance controller + safety node, ready: each in its own process (separate) or
    composed in one (stack: robot_rl_sim.ros_arm_stack); the outside topics are the same."""
    for node in ARM_NODES if request.param == "separate" else ("arm_stack",):
        graph.start(node)
    wait_ready(graph, "arm_hardware", "arm_safety")
    return graph
