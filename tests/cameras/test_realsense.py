"""RealSense cameras through the real pyrealsense2 frame path, on ``rs.software_device()`` devices: selection by
serial, colour + depth with crop/resize, exposure, device timestamps, frame-number gaps, unplug and replug."""

from __future__ import annotations

import time

import numpy as np
import pytest

rs = pytest.importorskip("pyrealsense2", reason="pyrealsense2 not installed (pip install -e '.[realsense]')")

from robot_rl.cameras import CameraConfig, CameraError, make_camera  # noqa: E402
from robot_rl.cameras.realsense import shared_devices  # noqa: E402
from tests.cameras.softcam import Injector, SoftRealSense, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def rs_cfg(serial: str, **kw) -> CameraConfig:
    base = dict(name="wrist", source="realsense", serial=serial, width=64, height=48, fps=30, open_timeout=5.0)
    return CameraConfig(**{**base, **kw})


def test_selects_by_serial_colour_depth_exposure_and_device_stamps():
    devices = shared_devices()
    a = SoftRealSense("sel-A", tag=10).plug(devices)
    b = SoftRealSense("sel-B", tag=200).plug(devices)
    # B's frames are stamped 0.3 s before they are sent: the camera must keep the device's capture time.
    feed = Injector([(a, 0.0), (b, -0.3)], fps=30)
    cfg = rs_cfg("sel-B", depth=True, exposure=300, crop=(16, 8, 32, 32), resize=(16, 16), max_staleness=1.0)
    stamps, lags = [], []
    try:
        with make_camera(cfg) as cam:
            deadline = time.monotonic() + 0.8
            while time.monotonic() < deadline:
                frame, t = cam.read()
                if not stamps or t != stamps[-1]:
                    stamps.append(t)
                    lags.append(time.monotonic() - t)
                    if len(stamps) == 5:
                        b.skip(3)
                time.sleep(0.005)
            frame, t = cam.read()
            depth, t_depth = cam.read_depth()
            scale = cam.depth_scale
        stats = cam.stats
    finally:
        feed.stop()
        a.unplug()
        b.unplug()
    assert frame.shape == (16, 16, 3) and frame.dtype == np.uint8 and not frame.flags.writeable
    assert (frame[..., 0] == 200).all() and (frame[..., 2] == 55).all(), "frames must come from serial sel-B"
    assert depth.shape == (16, 16) and depth.dtype == np.uint16 and (depth == 1200).all()
    assert scale == pytest.approx(0.001) and t_depth <= t
    assert b.colour_sensor.get_option(rs.option.exposure) == 300
    assert b.colour_sensor.get_option(rs.option.enable_auto_exposure) == 0
    assert len(stamps) >= 10 and np.all(np.diff(stamps) > 0), "timestamps must increase strictly"
    assert 0.25 < np.median(lags) < 0.6, f"device stamps not used: lag {np.median(lags):.3f} s"
    assert stats.dropped == 3, "a frame-number gap on the device must count as dropped frames"
    assert stats.disconnects == 0 and stats.connected is False  # stopped


def test_unplug_then_replug_reopens_by_serial():
    devices = shared_devices()
    first = SoftRealSense("plug-1", tag=1).plug(devices)
    feed = Injector([(first, 0.0)], fps=30)
    cfg = rs_cfg("plug-1", frame_timeout=0.3, reconnect_interval=0.1)
    try:
        with make_camera(cfg) as cam:
            assert wait_until(lambda: cam.stats.frames >= 3, 3)
            _, t_before = cam.read()
            feed.remove(first)
            first.unplug()
            assert wait_until(lambda: not cam.stats.connected, 3), "unplug not detected"
            assert cam.stats.disconnects == 1 and cam.staleness() > 0.25
            assert cam.read()[1] == t_before, "read() keeps returning the last frame without blocking"
            time.sleep(0.5)  # reopen attempts on the silent device fail and are counted
            assert cam.stats.failed_opens >= 1 and not cam.stats.connected
            second = SoftRealSense("plug-1", tag=2).plug(devices)  # the same camera, plugged back in
            feed.add(second)
            assert wait_until(lambda: cam.stats.reconnects == 1 and cam.read()[0][0, 0, 0] == 2, 5), cam.stats
            frame, t_after = cam.read()
            stats = cam.stats
    finally:
        feed.stop()
        first.unplug()
    second.unplug()
    assert t_after > t_before and stats.connected and stats.disconnects == 1
    assert frame.shape == (48, 64, 3)


def test_missing_serial_is_a_clear_error():
    cfg = rs_cfg("no-such-serial", open_timeout=0.5, reconnect_interval=0.1)
    t0 = time.monotonic()
    with pytest.raises(CameraError, match="no RealSense with serial no-such-serial"):
        make_camera(cfg).start()
    assert time.monotonic() - t0 < 3.0
