"""A car reality profile acts on the emulated car, seen from outside over DDS as a user's stack sees it: the
odometry arrives late with its true stamps and reports a wrong speed, a car commanded straight curves, and the speed
follows the command with the drivetrain's lag. Exaggerated values, so each effect stands out of a loaded machine's
noise."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

REALITY = {"odom_latency": 0.15, "odometry_speed_scale_error": 0.5, "trim_curvature": 0.5,
           "speed_time_constant": 0.4}


@pytest.mark.timeout(180)
def test_the_car_differs_from_the_sim_as_its_reality_says(graph, tmp_path) -> None:
    import yaml
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry

    from robot_rl.ros.link import RosLink
    from robot_rl.ros.msgs import from_stamp

    path = tmp_path / "exaggerated.yaml"
    path.write_text(yaml.safe_dump(REALITY))
    graph.start("car_hardware", "-p", f"reality:={path}")
    link = RosLink("reality_probe")
    try:
        # (stamp, arrival, x, y, yaw, reported speed, reported yaw rate)
        def row(m: Odometry) -> tuple:
            q, p = m.pose.pose.orientation, m.pose.pose.position
            yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
            return (from_stamp(m.header.stamp), time.time(), p.x, p.y, yaw, m.twist.twist.linear.x,
                    m.twist.twist.angular.z)

        link.subscribe("odom", Odometry, "odom", row, depth=10000)
        pub = link.publisher("cmd", Twist, "cmd_vel")
        assert not link.wait_for(["odom"], 90.0) and not link.wait_subscribed(["cmd"], 30.0), graph.log("car_hardware")
        cmd = Twist()
        cmd.linear.x = 0.5
        sent = time.time()
        for _ in range(30):  # 1.5 s straight ahead at 20 Hz
            pub.publish(cmd)
            time.sleep(0.05)
        time.sleep(0.3)
        rows = np.array([v for _, v in link.streams["odom"].items if v[0] >= sent - 0.1])
    finally:
        link.close()
    stamp, arrival, x, y, yaw, speed, yaw_rate = rows.T
    assert np.median(arrival - stamp) > 0.12, "odometry should arrive odom_latency late, with its true stamps"
    moving = speed > 0.6  # reported; the true speed is a third less
    dt = np.diff(stamp)[moving[1:]]
    true_speed = np.hypot(np.diff(x), np.diff(y))[moving[1:]] / dt
    reported = speed[1:][moving[1:]]
    assert np.median(reported / true_speed) == pytest.approx(1.5, rel=0.1)
    assert np.median(yaw_rate[moving] / speed[moving]) == pytest.approx(0.5, rel=0.15)  # commanded straight: curves
    # the drivetrain's lag: the nominal car is at speed 0.05 s after the command (the wheel servos), this one takes
    # 0.17-0.18 s to half of it (0.4 s ln 2 = 0.28 s for the lag alone; the chassis's own response runs ahead)
    half = stamp[np.argmax(speed > 0.5 * 0.5 * 1.5)]
    assert 0.12 < half - sent < 1.0, half - sent
