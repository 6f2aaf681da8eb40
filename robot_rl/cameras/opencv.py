"""OpenCV ``VideoCapture`` cameras: USB webcams (index or ``/dev/videoN``), stream URLs and video files.

Video files are replayed in real time (paced at ``fps`` or the file's own rate) so a recorded session looks like
a live camera; the end of a file is a disconnect unless ``loop`` is set, and the file is reopened after
``reconnect_interval`` like an unplugged webcam.
"""

from __future__ import annotations

import os
import time
from typing import Any

from robot_rl.cameras.base import Camera, CameraDisconnected, CameraError, Grab
from robot_rl.robots.camera import CameraConfig


def _target(device: str) -> int | str:
    return int(device) if device.strip().isdigit() else device


class OpenCVCamera(Camera):
    """A ``cv2.VideoCapture`` read on the capture thread; frames converted BGR -> RGB."""

    def __init__(self, cfg: CameraConfig) -> None:
        super().__init__(cfg)
        target = _target(cfg.device)
        self._target = target
        self._is_file = isinstance(target, str) and not target.startswith("/dev/") and "://" not in target
        self._cap: Any = None
        self._period = 0.0
        self._next = 0.0

    def _open(self) -> None:
        import cv2  # optional: cameras

        target = self._target
        if isinstance(target, str) and "://" not in target and not os.path.exists(target):
            raise CameraError(f"no such file or device: {target}")
        cap = cv2.VideoCapture(target)
        if not cap.isOpened():
            cap.release()
            kind = "video file (unsupported codec?)" if self._is_file else "device (busy, or no permission?)"
            raise CameraError(f"OpenCV could not open {target!r} as a {kind}")
        if self._is_file:
            rate = self.cfg.fps or cap.get(cv2.CAP_PROP_FPS) or 30.0
            self._period = 1.0 / rate
        else:
            # Requests only: a webcam may pick the nearest mode it has (crop/resize then give the configured shape).
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.cfg.width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.cfg.height)
            cap.set(cv2.CAP_PROP_FPS, self.cfg.fps)
            cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # newest frame, not a queue of old ones
            if self.cfg.exposure is not None:
                cap.set(cv2.CAP_PROP_AUTO_EXPOSURE, 1)  # V4L2: 1 = manual, 3 = aperture priority (auto)
                cap.set(cv2.CAP_PROP_EXPOSURE, float(self.cfg.exposure))
            self._period = 0.0
        self._cap = cap
        self._next = time.monotonic()

    def _grab(self, timeout: float) -> Grab | None:
        if self._period > 0:  # pace file replay at its frame rate (sleeping on the stop event stays interruptible)
            delay = self._next - time.monotonic()
            if delay > timeout:
                self._stop.wait(timeout)
                return None
            if delay > 0:
                self._stop.wait(delay)
            now = time.monotonic()
            self._next = max(self._next + self._period, now - self._period)  # no burst after a stall
        ok, frame = self._cap.read()
        if not ok and self._is_file and self.cfg.loop:
            import cv2  # optional: cameras

            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, frame = self._cap.read()
        if not ok or frame is None:
            raise CameraDisconnected("end of file" if self._is_file else "read failed (device unplugged?)")
        return Grab(frame, bgr=frame.ndim == 3)

    def _close(self) -> None:
        cap, self._cap = self._cap, None
        if cap is not None:
            cap.release()
