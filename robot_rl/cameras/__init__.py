"""Cameras: a capture thread per camera, latest frame + timestamp without blocking (RealSense, OpenCV, ROS 2),
crop/resize per camera, and a rig that reads several cameras as one ``obs['pixels']`` dict with a skew bound.

Only numpy/gymnasium are imported here; OpenCV, pyrealsense2 and rclpy are imported by the source that needs them.
"""

from robot_rl.cameras.base import Camera, CameraDisconnected, CameraError, CameraStats, FrameRejected, crop_resize
from robot_rl.cameras.config import RigConfig
from robot_rl.cameras.rig import CameraRig, RigReading, RigStats, SkewError, make_camera, pixels_space
from robot_rl.robots.camera import CameraConfig

__all__ = [
    "Camera", "CameraConfig", "CameraDisconnected", "CameraError", "CameraRig", "CameraStats", "FrameRejected",
    "RigConfig", "RigReading", "RigStats", "SkewError", "crop_resize", "make_camera", "pixels_space",
]
