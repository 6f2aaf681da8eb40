"""The car through the ROS 2 path: policy twist -> safety node -> driving controller -> MuJoCo car hardware node.
The safety node's watchdog (75 ms timeout) stops the car when the policy's commands stop. The bound below leaves
scheduling slack for a loaded 2-core CI machine (a run there took 102 ms); without a watchdog no stop comes at all."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PERIOD = 0.05  # a 20 Hz policy
STOP_BOUND = 0.25  # s from the last policy command to the zero command seen on cmd_vel


@pytest.mark.timeout(180)
def test_car_drives_and_watchdog_stops_it(graph) -> None:
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from std_msgs.msg import String

    from robot_rl.ros.link import RosLink

    for node in ("car_hardware", "drive_controller", "car_safety"):
        graph.start(node)
    link = RosLink("car_probe")
    try:
        link.subscribe("odom", Odometry, "odom", lambda m: m.twist.twist.linear.x)
        link.subscribe("covariance", Odometry, "odom", lambda m: (np.array(m.pose.covariance),
                                                                  np.array(m.twist.covariance)))
        link.subscribe("cmd", Twist, "cmd_vel", lambda m: m.linear.x, stamped=False, depth=10000)
        link.subscribe("state", String, "safety_state", lambda m: m.data, stamped=False, latched=True)
        assert not link.wait_for(["odom", "cmd", "state"], timeout=90.0), {n: graph.log(n) for n in graph.procs}
        pub = link.publisher("policy", Twist, "policy/cmd_vel")
        while pub.get_subscription_count() == 0:
            time.sleep(0.05)
        cmd = Twist()
        cmd.linear.x = 0.6
        for _ in range(20):  # 1 s at 20 Hz (0.6 m: stays clear of the walls from the start pose)
            pub.publish(cmd)
            last = time.time()
            time.sleep(PERIOD)
        moving = link.streams["odom"].latest()[1]
        time.sleep(1.0)
        stopped = link.streams["odom"].latest()[1]
        cmds = list(link.streams["cmd"].items)
        first_zero = next(t for t, v in cmds if t > last and v == 0.0)
        state = link.streams["state"].latest()[1]
        pose_cov, twist_cov = link.streams["covariance"].latest()[1]
    finally:
        link.close()
    assert moving > 0.4, moving
    assert first_zero - last <= STOP_BOUND, f"stop reached the base {1e3 * (first_zero - last):.0f} ms late"
    assert abs(stopped) < 0.05 and state == "hold", (stopped, state)
    assert np.isfinite(moving)
    # the sim's odometry is exact: a small, non-zero variance on each dimension, no correlations
    from robot_rl_sim.ros_car_node import ODOM_VARIANCE_FLOOR

    for cov in (pose_cov.reshape(6, 6), twist_cov.reshape(6, 6)):
        assert np.allclose(np.diag(cov), ODOM_VARIANCE_FLOOR) and np.count_nonzero(cov - np.diag(np.diag(cov))) == 0

