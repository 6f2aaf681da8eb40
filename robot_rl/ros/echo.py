"""The DDS floor: a node that answers every ``PoseStamped`` on ``floor/ping`` at once with its header on
``floor/pong`` — the same message type and receive path (a ``FastSubscription`` thread) as a command to the arm,
but no safety filter, controller or physics step. The latency benchmark sends to it beside the arm's commands in
the same run, so the arm path's round trip is quoted against what Fast DDS alone takes under the same load.

    python -c "from robot_rl.ros.echo import main; main()" [--rt-priority 50]
"""

from __future__ import annotations

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from std_msgs.msg import Header

from robot_rl.ros.fast_sub import FastSubscription
from robot_rl.ros.node import run_node

PING, PONG = "floor/ping", "floor/pong"


class EchoNode(Node):
    """``floor/ping`` (PoseStamped) → ``floor/pong`` (its Header), published from the receive thread."""

    def __init__(self) -> None:
        super().__init__("dds_echo")
        self.pub = self.create_publisher(Header, PONG, 100)
        self.sub = FastSubscription(self, PoseStamped, PING, lambda msg: self.pub.publish(msg.header))

    def close(self) -> None:
        self.sub.close()


def main(argv: list[str] | None = None) -> int:
    return run_node(EchoNode, argv)
