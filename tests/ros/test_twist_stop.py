"""The Servo output's controlled stop, in one process on a real rclpy node: the twist streamed after the stop starts
from the twist last sent (no step, which the joints answer with a dip and a rebound) and falls monotonically to
rest."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def test_the_stop_twist_continues_from_the_last_twist_and_decays(domain: int) -> None:
    import rclpy
    from rclpy.node import Node

    from robot_rl.robots.profile import load_profile
    from robot_rl_controllers.arm_outputs import TwistOutput

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("twist_stop", context=ctx)
    try:
        profile = load_profile("ur5e_servo", "arm")
        clock = [0.0]
        # the arm lags its reference (as any tracking arm does): the twist carries a tracking term on top of the
        # reference's velocity, which the stop must not drop in one step
        arm = {"pos": np.array([0.4, 0.0, 0.3]), "quat": np.array([1.0, 0.0, 0.0, 0.0])}
        out = TwistOutput(node, profile, lambda: clock[0], lambda reasons: None,
                          lambda: (arm["pos"].copy(), arm["quat"].copy()), lambda: node.get_clock().now().to_msg())
        out.send(arm["pos"], arm["quat"], None)
        out.send(arm["pos"] + np.array([0.0, -0.03, 0.0]), arm["quat"], None)
        period = 1.0 / profile.command.rate_hz
        for _ in range(8):
            clock[0] += period
            out.tick(clock[0])
            arm["pos"] = arm["pos"] + 0.5 * out.last_linear * period  # a slow arm: the tracking term grows
        before = out.last_linear.copy()
        tracking = np.linalg.norm(before - out.filter.vel)
        assert tracking > 0.02, "the setup must give a tracking term for the stop to keep"

        out.stop()
        speeds = []
        for _ in range(100):
            clock[0] += period
            out.tick(clock[0])
            arm["pos"] = arm["pos"] + out.last_linear * period
            speeds.append(float(np.linalg.norm(out.last_linear)))
        assert abs(speeds[0] - np.linalg.norm(before)) < 0.25 * tracking  # no step down by the tracking term
        assert np.all(np.diff(speeds) <= 1e-9), "the stop twist rose again"
        assert speeds[-1] < 1e-3
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
