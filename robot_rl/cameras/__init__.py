"""Cameras: a capture thread per camera, latest frame + timestamp without blocking (RealSense, OpenCV, ROS 2)."""
