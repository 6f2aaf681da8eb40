"""Intel RealSense cameras through pyrealsense2's sensor API: colour (rgb8) and optionally depth (z16), a camera
chosen by serial number, manual exposure, and reopening by serial after an unplug.

The sensor API (``sensor.open/start`` into an ``rs.syncer``) is used instead of ``rs.pipeline`` because it sees
every device a context knows, software devices included (the pipeline does not), so tests drive this exact path
with ``rs.software_device()``. Devices are found through one process-wide context: ``query_devices()`` plus the
devices announced by its devices-changed callback (hot-plugged cameras; in pyrealsense2 2.59 software devices
appear only there).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from robot_rl.cameras.base import Camera, CameraError, Grab, wall_to_monotonic
from robot_rl.robots.camera import CameraConfig

_shared: RealSenseDevices | None = None
_shared_lock = threading.Lock()


class RealSenseDevices:
    """The RealSense devices one ``rs.context`` knows, by serial number, kept current by its hot-plug callback."""

    def __init__(self, context: Any = None) -> None:
        import pyrealsense2 as rs  # optional: realsense

        self.rs = rs
        self.context = context if context is not None else rs.context()
        self._announced: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.context.set_devices_changed_callback(self._changed)

    def _changed(self, event: Any) -> None:
        with self._lock:
            for serial, dev in list(self._announced.items()):
                if event.was_removed(dev):
                    del self._announced[serial]
            for dev in event.get_new_devices():
                serial = self.serial_of(dev)
                if serial:
                    self._announced[serial] = dev  # a replugged camera replaces its old handle

    def serial_of(self, dev: Any) -> str:
        info = self.rs.camera_info.serial_number
        return dev.get_info(info) if dev.supports(info) else ""

    def devices(self) -> list[tuple[str, Any]]:
        """``(serial, device)`` for every connected device: enumerated ones first, then hot-plugged ones."""
        found = [(self.serial_of(d), d) for d in self.context.query_devices()]
        with self._lock:
            found += list(reversed(self._announced.items()))
        # is_connected() appeared in pyrealsense2 2.56: older versions list only connected devices anyway.
        return [(s, d) for s, d in found if not hasattr(d, "is_connected") or d.is_connected()]

    def find(self, serial: str) -> Any:
        """The connected device with this serial (any device when ``serial`` is empty); CameraError if none."""
        devices = self.devices()
        for s, dev in devices:
            if not serial or s == serial:
                return dev
        seen = sorted({s for s, _ in devices}) or "none"
        raise CameraError(f"no RealSense with serial {serial or '(any)'} connected (connected: {seen})")


def shared_devices() -> RealSenseDevices:
    """The process-wide device registry every RealSenseCamera uses (one context, one hot-plug callback)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = RealSenseDevices()
        return _shared


class RealSenseCamera(Camera):
    """Colour (+ depth) frames of the RealSense with ``cfg.serial``; timestamps from the device when they are on
    the host clock (system/global time domain), else the arrival time; frame-number gaps count as dropped."""

    def __init__(self, cfg: CameraConfig, devices: RealSenseDevices | None = None) -> None:
        super().__init__(cfg)
        self.devices = devices if devices is not None else shared_devices()
        self.rs = self.devices.rs
        self._started: list[Any] = []
        self._syncer: Any = None

    def _profile(self, sensors: list[Any], stream: Any, fmt: Any) -> tuple[Any, Any]:
        cfg, offered = self.cfg, []
        for sensor in sensors:
            for p in sensor.get_stream_profiles():
                if p.stream_type() != stream or not p.is_video_stream_profile():
                    continue
                v = p.as_video_stream_profile()
                offered.append(f"{v.width()}x{v.height()}@{p.fps()} {p.format()}")
                if (p.format() == fmt and v.width() == cfg.width and v.height() == cfg.height
                        and abs(p.fps() - cfg.fps) < 0.5):
                    return sensor, p
        raise CameraError(f"no {stream} {fmt} {cfg.width}x{cfg.height}@{cfg.fps:g} profile "
                          f"(offered: {', '.join(sorted(set(offered))) or 'none'})")

    def _open(self) -> None:
        rs, cfg = self.rs, self.cfg
        dev = self.devices.find(cfg.serial)
        sensors = list(dev.query_sensors())
        wanted = [self._profile(sensors, rs.stream.color, rs.format.rgb8)]
        if cfg.depth:
            depth_sensor, depth_profile = self._profile(sensors, rs.stream.depth, rs.format.z16)
            wanted.append((depth_sensor, depth_profile))
            units = rs.option.depth_units
            self.depth_scale = float(depth_sensor.get_option(units)) if depth_sensor.supports(units) else 0.001
        colour = wanted[0][0]
        if cfg.exposure is not None:
            if colour.supports(rs.option.enable_auto_exposure):
                colour.set_option(rs.option.enable_auto_exposure, 0)
            colour.set_option(rs.option.exposure, float(cfg.exposure))
        elif colour.supports(rs.option.enable_auto_exposure):
            colour.set_option(rs.option.enable_auto_exposure, 1)
        # One sensor may carry both streams (e.g. D405): open each sensor once with all its profiles.
        by_sensor: dict[int, tuple[Any, list[Any]]] = {}
        for sensor, profile in wanted:
            by_sensor.setdefault(id(sensor), (sensor, []))[1].append(profile)
        self._syncer = rs.syncer(2)
        for sensor, profiles in by_sensor.values():
            sensor.open(profiles if len(profiles) > 1 else profiles[0])
            self._started.append(sensor)
            sensor.start(self._syncer)

    def _grab(self, timeout: float) -> Grab | None:
        rs = self.rs
        ok, frames = self._syncer.try_wait_for_frames(int(timeout * 1000))
        if not ok:
            return None
        colour = frames.get_color_frame()
        if not colour:
            return None  # the syncer hands over a lone depth frame at stream start
        depth = frames.get_depth_frame() if self.cfg.depth else None

        stamp = None
        if colour.get_frame_timestamp_domain() in (rs.timestamp_domain.system_time, rs.timestamp_domain.global_time):
            stamp = wall_to_monotonic(colour.get_timestamp() / 1000.0)
        # The frame buffers go back to librealsense's pool with the frame: crop_resize copies them.
        return Grab(np.asanyarray(colour.get_data()), stamp=stamp,
                    depth=np.asanyarray(depth.get_data()) if depth else None,
                    number=int(colour.get_frame_number()))

    def _close(self) -> None:
        started, self._started, self._syncer = self._started, [], None
        for sensor in started:
            for step in (sensor.stop, sensor.close):
                try:
                    step()
                except Exception:  # an unplugged sensor is already stopped; release the rest
                    pass
