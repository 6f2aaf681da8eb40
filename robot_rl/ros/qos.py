"""Incompatible QoS made visible: a publisher whose QoS cannot match a subscription (e.g. best-effort sensor-data QoS
on a reliable command topic) is silently ignored by DDS; :func:`watch_qos` logs it once per topic with the fix."""

from __future__ import annotations

from typing import Any

from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node


def watch_qos(node: Node, msg_type: type, topic: str, qos: Any = 10) -> Any:
    """A raw, no-op subscription on ``topic`` with ``qos`` (the QoS the node's real subscription uses) whose
    incompatible-QoS event logs one warning naming the topic, the offending policy and what to publish instead."""
    warned: list[bool] = []

    def on_incompatible(event: Any) -> None:
        if warned:
            return
        warned.append(True)
        policy = getattr(event.last_policy_kind, "name", str(event.last_policy_kind))
        node.get_logger().warning(
            f"{node.resolve_topic_name(topic)}: a publisher with incompatible QoS ({policy}) is ignored: this node "
            "subscribes RELIABLE, VOLATILE, depth 10 (rclpy's default profile); publish with a compatible profile "
            "(reliable; e.g. not qos_profile_sensor_data)")

    return node.create_subscription(msg_type, topic, lambda _: None, qos, raw=True,
                                    event_callbacks=SubscriptionEventCallbacks(incompatible_qos=on_incompatible))
