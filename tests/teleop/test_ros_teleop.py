"""ROS 2 teleop: a real publisher process (rclpy over Fast DDS, own ROS_DOMAIN_ID, localhost discovery) sends
sensor_msgs/Joy and geometry_msgs/Twist; the real subscriber maps them, sees a button press, and reports the
input disconnected once the publisher goes silent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (pip install -e '.[ros2]')")

from robot_rl.teleop.config import TeleopConfig  # noqa: E402
from robot_rl.teleop.ros_teleop import RosTeleop  # noqa: E402
from tests.ros.graph import ROOT, new_domain, ros_env  # noqa: E402
from tests.teleop.helpers import wait_for  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(60)]

PUBLISHER = textwrap.dedent("""
    import time
    import rclpy
    from geometry_msgs.msg import Twist
    from sensor_msgs.msg import Joy
    rclpy.init()
    node = rclpy.create_node("fake_teleop")
    joy_pub = node.create_publisher(Joy, "joy", 10)
    twist_pub = node.create_publisher(Twist, "cmd_vel", 10)
    deadline = time.monotonic() + 20
    pubs = (joy_pub, twist_pub)
    while min(p.get_subscription_count() for p in pubs) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    def phase(seconds, axes, buttons, vx, wz):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            joy = Joy(axes=axes, buttons=buttons)
            joy.header.stamp = node.get_clock().now().to_msg()
            joy_pub.publish(joy)
            twist = Twist()
            twist.linear.x, twist.angular.z = vx, wz
            twist_pub.publish(twist)
            time.sleep(0.02)  # 50 Hz, like joy_node's autorepeat
    zero8 = [0] * 8
    phase(0.6, [0.0] * 6, zero8, 0.0, 0.0)
    phase(0.6, [0.0, 0.8, 0.0, 0.0, 0.0, 0.0], zero8, 0.25, -0.5)   # left stick up
    phase(0.3, [0.0] * 6, [0] * 7 + [1], 0.0, 0.0)                   # start button held: success
    phase(0.6, [0.0] * 6, zero8, 0.0, 0.0)
    node.destroy_node()
    rclpy.shutdown()
""")


def test_joy_and_twist_from_a_ros2_process(monkeypatch: pytest.MonkeyPatch) -> None:
    domain = new_domain()
    for k, v in ros_env(domain).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)
    joy = RosTeleop(TeleopConfig(device="ros", disconnect_timeout_s=0.3), 4, node_name="teleop_joy")
    twist = RosTeleop(TeleopConfig(device="ros", ros_msg="twist", ros_topic="cmd_vel", deadzone=0.0,
                                   scale=(2.0, 1.0)), 2, node_name="teleop_twist")
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER], env=ros_env(domain), cwd=ROOT)
    try:
        assert not joy.read().connected  # never heard: the robot is held
        wait_for(joy, lambda r: r.connected, timeout=20)
        assert not joy.read().active
        r = wait_for(joy, lambda r: r.active, timeout=5)
        np.testing.assert_allclose(r.action, [(0.8 - 0.1) / 0.9, 0, 0, -1], atol=1e-6)  # joy: up is +
        r = wait_for(twist, lambda r: r.active, timeout=5)
        np.testing.assert_allclose(r.action, [0.5, -0.5])  # 0.25 m/s * 2, yaw rate as is
        events: set[str] = set()
        wait_for(joy, lambda r: "success" in events, timeout=5, events=events)
        assert events == {"success"}
        r = wait_for(joy, lambda r: not r.connected, timeout=10)  # publisher gone: silent past the timeout
        assert not r.active and np.array_equal(r.action, np.zeros(4))
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        joy.close()
        twist.close()
