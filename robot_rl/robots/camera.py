"""One camera's configuration (``CameraConfig``): where its frames come from and how they are cropped and resized.

It lives in robot_rl.robots because a robot profile names its cameras (robots/profile.py) and robot_rl.cameras sits
above robots in the package layers (docs/design/package-layers.md); robot_rl.cameras re-exports it. Plain dataclass
with documented fields, filled from YAML by ``robot_rl.config.from_dict`` like every other config.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = ("opencv", "realsense", "ros")


@dataclass
class CameraConfig:
    """One camera: where its frames come from and how they are cropped and resized."""

    name: str = "front"
    """Key of this camera in ``obs['pixels']`` (the sims' camera names: ``front``, ``wrist``...)."""
    source: str = "opencv"
    """opencv (USB webcam, video file, stream URL) | realsense (pyrealsense2) | ros (sensor_msgs Image topic)."""
    device: str = "0"
    """OpenCV: a device index (``"0"``), a device path (``/dev/video2``), a video file or a stream URL."""
    serial: str = ""
    """RealSense: serial number of the camera to open; empty = the first RealSense found."""
    topic: str = ""
    """ROS 2: image topic, e.g. ``/camera/front/image_raw`` (or ``.../compressed`` with ``compressed: true``)."""
    compressed: bool = False
    """ROS 2: subscribe ``sensor_msgs/CompressedImage`` (JPEG/PNG, decoded with OpenCV) instead of ``Image``."""
    width: int = 640
    """Requested capture width in pixels (OpenCV devices, RealSense stream profile)."""
    height: int = 480
    """Requested capture height in pixels."""
    fps: float = 30.0
    """Requested capture rate. OpenCV video files are replayed at this rate (0: the file's own rate)."""
    crop: tuple[int, int, int, int] | None = None
    """``(x, y, w, h)`` region of the captured frame kept before resizing; None keeps the whole frame."""
    resize: tuple[int, int] | None = None
    """``(h, w)`` of the delivered frame (OpenCV ``INTER_AREA`` when shrinking, ``INTER_LINEAR`` when growing).
    None: the crop size, or without a crop ``(height, width)`` (frames of another size are resized to it, so the
    shape in the observation space always holds)."""
    depth: bool = False
    """RealSense: also stream depth (z16, same size and rate as colour); read with ``Camera.read_depth``."""
    exposure: float | None = None
    """Manual exposure in the device's own units (RealSense ``rs.option.exposure``, OpenCV
    ``CAP_PROP_EXPOSURE``); None leaves auto exposure on."""
    loop: bool = False
    """OpenCV video files: start again at the end. Otherwise the end of the file is a disconnect (replay once)."""
    frame_timeout: float = 1.0
    """Seconds without a frame after which the camera counts as disconnected and is reopened."""
    reconnect_interval: float = 1.0
    """Seconds between attempts to reopen a disconnected or missing camera."""
    open_timeout: float = 5.0
    """``start()`` waits this long for the first frame and raises ``CameraError`` with the reason if none came;
    0: return at once and keep trying in the background."""
    max_staleness: float = 0.1
    """A frame older than this (seconds) is stale: the rig waits for a newer one and counts the camera late."""
    history: int = 8
    """Frames kept per camera so the rig can pick, across cameras, the frames closest in time."""
    use_header_stamp: bool = True
    """ROS 2: timestamp frames with ``header.stamp`` (the capture time, wall clock); False: the arrival time."""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"camera {self.name!r}: source must be one of {SOURCES}, got {self.source!r}")
        if self.crop is not None:
            self.crop = tuple(int(v) for v in self.crop)  # type: ignore[assignment]
            if len(self.crop) != 4 or min(self.crop) < 0 or self.crop[2] == 0 or self.crop[3] == 0:
                raise ValueError(f"camera {self.name!r}: crop must be (x, y, w, h) with w, h > 0, got {self.crop}")
        if self.resize is not None:
            self.resize = tuple(int(v) for v in self.resize)  # type: ignore[assignment]
            if len(self.resize) != 2 or min(self.resize) <= 0:
                raise ValueError(f"camera {self.name!r}: resize must be (h, w) > 0, got {self.resize}")
        if self.source == "ros" and not self.topic:
            raise ValueError(f"camera {self.name!r}: source ros needs a topic")
        if self.frame_timeout <= 0 or self.reconnect_interval <= 0 or self.history < 1:
            raise ValueError(f"camera {self.name!r}: frame_timeout, reconnect_interval and history must be > 0")

    def output_shape(self) -> tuple[int, int, int]:
        """``(H, W, 3)`` of every delivered frame."""
        if self.resize is not None:
            return (self.resize[0], self.resize[1], 3)
        if self.crop is not None:
            return (self.crop[3], self.crop[2], 3)
        return (self.height, self.width, 3)
