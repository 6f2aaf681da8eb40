"""A RealSense made of ``rs.software_device()``: the device librealsense itself emulates, with a colour (rgb8)
and a depth (z16) sensor, a serial number and exposure options, fed frames by a thread. Cameras open it through
the same context, serial lookup, sensor and syncer calls as a USB RealSense.

Frames are uniform: colour ``(tag, frame_number % 256, 255 - tag)``, depth ``1000 + tag``, so a test can tell
which device (and frame) a delivered frame came from after any crop/resize.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pyrealsense2 as rs

from robot_rl.cameras.realsense import RealSenseDevices


class SoftRealSense:
    def __init__(self, serial: str, tag: int, width: int = 64, height: int = 48, fps: int = 30) -> None:
        self.serial, self.tag, self.width, self.height, self.fps = serial, tag, width, height, fps
        self.dev = rs.software_device()
        self.dev.register_info(rs.camera_info.serial_number, serial)
        self.dev.register_info(rs.camera_info.name, "Intel RealSense (software)")
        self.depth_sensor = self.dev.add_sensor("Stereo Module")
        self.colour_sensor = self.dev.add_sensor("RGB Camera")
        intr = rs.intrinsics()
        intr.width, intr.height, intr.fx, intr.fy, intr.ppx, intr.ppy = width, height, 60.0, 60.0, width / 2, height / 2
        self.depth_profile = self._stream(self.depth_sensor, rs.stream.depth, rs.format.z16, 2, 0, intr)
        self.colour_profile = self._stream(self.colour_sensor, rs.stream.color, rs.format.rgb8, 3, 1, intr)
        self.depth_sensor.add_read_only_option(rs.option.depth_units, 0.001)
        # pyrealsense2 2.59 binds option_range's positional arguments as (min, max, default, step).
        self.colour_sensor.add_option(rs.option.exposure, rs.option_range(1, 10000, 100, 1), True)
        self.colour_sensor.add_option(rs.option.enable_auto_exposure, rs.option_range(0, 1, 1, 1), True)
        self.dev.create_matcher(rs.matchers.dlr_c)  # what a D400 pairs depth and colour with
        self.number = 0
        self._lock = threading.Lock()

    def _stream(self, sensor: rs.software_sensor, kind: rs.stream, fmt: rs.format, bpp: int, uid: int,
                intr: rs.intrinsics) -> rs.video_stream_profile:
        vs = rs.video_stream()
        vs.type, vs.index, vs.uid, vs.fmt, vs.bpp = kind, 0, uid, fmt, bpp
        vs.width, vs.height, vs.fps, vs.intrinsics = self.width, self.height, self.fps, intr
        return sensor.add_video_stream(vs).as_video_stream_profile()

    def plug(self, devices: RealSenseDevices) -> SoftRealSense:
        """Announces the device to the cameras' context (the hot-plug event a USB camera raises)."""
        self.dev.add_to(devices.context)
        return self

    def skip(self, n: int) -> None:
        """The next frame number jumps by ``n``: ``n`` frames lost on the device side."""
        with self._lock:
            self.number += n

    def inject(self, stamp_wall: float) -> None:
        """One colour + depth frame pair stamped ``stamp_wall`` (``time.time()`` seconds, system-time domain)."""
        with self._lock:
            self.number += 1
            number = self.number
        colour = np.empty((self.height, self.width, 3), np.uint8)
        colour[...] = (self.tag, number % 256, 255 - self.tag)
        depth = np.full((self.height, self.width), 1000 + self.tag, np.uint16)
        for sensor, profile, pixels, bpp in ((self.depth_sensor, self.depth_profile, depth, 2),
                                             (self.colour_sensor, self.colour_profile, colour, 3)):
            f = rs.software_video_frame()
            f.pixels, f.bpp, f.stride, f.profile = pixels, bpp, self.width * bpp, profile
            f.timestamp, f.domain, f.frame_number = stamp_wall * 1000.0, rs.timestamp_domain.system_time, number
            sensor.on_video_frame(f)

    def unplug(self) -> None:
        """What an unplug does to open streams: they stop and close under the camera."""
        for sensor in (self.colour_sensor, self.depth_sensor):
            for step in (sensor.stop, sensor.close):
                try:
                    step()
                except RuntimeError:
                    pass  # not streaming (the camera had not opened this sensor)


class Injector:
    """Feeds devices at ``fps`` from one thread. Tick ``k`` is stamped ``start + k / fps + offset`` (exact, whatever
    the thread's scheduling jitter on a loaded machine), so the relative timing of several cameras is exact."""

    def __init__(self, targets: list[tuple[SoftRealSense, float]], fps: float) -> None:
        self.targets, self.period = list(targets), 1.0 / fps
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_t, start = time.monotonic(), time.time()
        k = 0
        while not self._stop.is_set():
            for dev, offset in list(self.targets):
                dev.inject(start + k * self.period + offset)
            k += 1
            next_t += self.period
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def remove(self, dev: SoftRealSense) -> None:
        self.targets = [(d, o) for d, o in self.targets if d is not dev]

    def add(self, dev: SoftRealSense, offset: float = 0.0) -> None:
        self.targets = [*self.targets, (dev, offset)]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def wait_until(cond: Callable[[], object], timeout: float, poll: float = 0.01) -> bool:
    """Polls ``cond`` until it is true or ``timeout`` passes; returns its last truth value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(poll)
    return bool(cond())
