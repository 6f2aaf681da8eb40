"""Test camera node (run in its own process): publishes ``<prefix>/image`` (sensor_msgs/Image, rgb8) and
``<prefix>/compressed`` (sensor_msgs/CompressedImage, JPEG) with the same header stamp, at ``--fps``.

Frames: left half ``(tag, 0, 100)``, right half ``(0, 200, 0)`` (RGB), so a cropped frame shows which half and
which publisher (tag) it came from. Stops on SIGINT.

    python -m tests.cameras.ros_pub --prefix /cam --tag 7 --fps 30
"""

from __future__ import annotations

import argparse
import time

import cv2
import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from sensor_msgs.msg import CompressedImage

from robot_rl.ros.msgs import image_msg, to_stamp


def frame(tag: int, height: int, width: int) -> np.ndarray:
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[:, : width // 2] = (tag, 0, 100)
    rgb[:, width // 2:] = (0, 200, 0)
    return rgb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="/cam")
    ap.add_argument("--tag", type=int, default=7)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--height", type=int, default=48)
    ap.add_argument("--width", type=int, default=64)
    args = ap.parse_args()
    rclpy.init()
    node = rclpy.create_node("test_camera_pub")
    raw = node.create_publisher(type(image_msg(np.zeros((1, 1, 3), np.uint8), 0.0, "")), f"{args.prefix}/image", 10)
    jpeg = node.create_publisher(CompressedImage, f"{args.prefix}/compressed", 10)
    rgb = frame(args.tag, args.height, args.width)
    data = cv2.imencode(".jpg", rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()

    def tick() -> None:
        now = time.time()
        raw.publish(image_msg(rgb, now, "cam"))
        msg = CompressedImage(format="jpeg", data=data)
        msg.header.stamp, msg.header.frame_id = to_stamp(now), "cam"
        jpeg.publish(msg)

    node.create_timer(1.0 / args.fps, tick)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
