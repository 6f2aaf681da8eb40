"""CameraRig: several cameras as one ``obs['pixels']`` dict, matched by timestamp with a skew bound.

Skew and staleness are driven exactly with RealSense software devices whose frames carry chosen capture stamps.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("pyrealsense2", reason="pyrealsense2 not installed (pip install -e '.[realsense]')")

from robot_rl.cameras import CameraConfig, CameraError, CameraRig, RigConfig, SkewError  # noqa: E402
from robot_rl.cameras.realsense import shared_devices  # noqa: E402
from tests.cameras.softcam import Injector, SoftRealSense, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(60)
FPS = 20.0  # 50 ms between frames


def two_cameras(prefix: str, offset: float, **rig_kw) -> tuple[CameraRig, Injector, list[SoftRealSense]]:
    devices = shared_devices()
    devs = [SoftRealSense(f"{prefix}-{i}", tag=i + 1, fps=int(FPS)).plug(devices) for i in range(2)]
    feed = Injector([(devs[0], 0.0), (devs[1], offset)], fps=FPS)
    cams = tuple(CameraConfig(name=n, source="realsense", serial=d.serial, width=64, height=48, fps=FPS,
                              resize=(32, 32), max_staleness=0.25, frame_timeout=0.5, reconnect_interval=0.1)
                 for n, d in zip(("front", "wrist"), devs))
    return CameraRig(RigConfig(cameras=cams, **rig_kw)), feed, devs


def stop_all(rig: CameraRig, feed: Injector, devs: list[SoftRealSense]) -> None:
    feed.stop()
    rig.stop()
    for d in devs:
        d.unplug()


def test_aligned_cameras_are_read_within_the_skew_bound():
    rig, feed, devs = two_cameras("aligned", offset=0.003, max_skew=0.01, sync_timeout=0.2, strict=True)
    try:
        rig.start()
        readings = []
        for _ in range(12):
            readings.append(rig.read())
            time.sleep(0.02)
    finally:
        stop_all(rig, feed, devs)
    assert all(r.skew <= 0.01 and not r.late for r in readings)
    assert all(abs(r.skew - 0.003) < 1e-3 for r in readings), [r.skew for r in readings]
    for name, tag in (("front", 1), ("wrist", 2)):
        stamps = [r.stamps[name] for r in readings]
        assert np.all(np.diff(stamps) >= 0), f"{name}: set timestamps went backwards"
        assert all((r.pixels[name][..., 0] == tag).all() for r in readings)
    # Frames of one set come from the same injection: the frame counter (green) matches across cameras.
    assert all(r.pixels["front"][0, 0, 1] == r.pixels["wrist"][0, 0, 1] for r in readings)
    assert rig.stats.out_of_bound == 0 and rig.stats.late == {"front": 0, "wrist": 0}


def test_skew_beyond_the_bound_is_refused_or_flagged_within_the_timeout():
    # wrist frames are stamped 25 ms after front's: half a period, so no pair is ever closer than 25 ms.
    rig, feed, devs = two_cameras("skewed", offset=0.025, max_skew=0.01, sync_timeout=0.15, strict=True)
    try:
        rig.start()
        for _ in range(3):
            t0 = time.monotonic()
            with pytest.raises(SkewError, match=r"skew 2[45]\.\d ms \(max 10\.0\)"):
                rig.read()
            assert time.monotonic() - t0 < 0.15 + 0.1, "read() must give up after sync_timeout"
        rig.cfg.strict = False
        t0 = time.monotonic()
        reading = rig.read()
        elapsed = time.monotonic() - t0
    finally:
        stop_all(rig, feed, devs)
    assert elapsed < 0.25 and reading.late and reading.skew == pytest.approx(0.025, abs=1e-3)
    stats = rig.stats
    assert stats.out_of_bound == 4 and sum(stats.late.values()) >= 4 and stats.waited == 4


def test_a_stale_camera_is_waited_for_a_bounded_time_then_counted_late():
    rig, feed, devs = two_cameras("stale", offset=0.0, max_skew=0.01, sync_timeout=0.1, strict=False)
    try:
        rig.start()
        assert rig.read().late == ()
        feed.remove(devs[1])  # wrist stops delivering (unplugged, cable pulled...)
        devs[1].unplug()
        time.sleep(0.3)  # older than max_staleness (0.25 s)
        t0 = time.monotonic()
        reading = rig.read()
        elapsed = time.monotonic() - t0
        assert wait_until(lambda: rig.cameras["wrist"].stats.disconnects == 1, 2)
    finally:
        stop_all(rig, feed, devs)
    assert reading.late == ("wrist",) and 0.1 <= elapsed < 0.2
    assert rig.stats.late == {"front": 0, "wrist": 1}


def test_a_read_after_a_time_has_only_frames_captured_then_or_later():
    # every frame arrives 120 ms after its capture (a camera's latency): the newest frame at any moment shows the
    # scene of 120 ms before, as the first observation after an instant reset would
    rig, feed, devs = two_cameras("after", offset=0.0, max_skew=0.01, sync_timeout=0.1, strict=False)
    feed.stop()
    feed = Injector([(devs[0], -0.12), (devs[1], -0.12)], fps=FPS)
    try:
        rig.start()
        rig.read(timeout=2.0)
        t = time.monotonic()
        assert max(rig.read().stamps.values()) < t  # without the bound, a frame of before t
        reading = rig.read(after=t, timeout=1.0)
        waited = time.monotonic() - t
        assert min(reading.stamps.values()) >= t and 0.1 <= waited < 0.6, (reading.stamps, t, waited)
        feed.remove(devs[1])  # the wrist camera stops delivering: no frame of after the time ever comes
        t = time.monotonic()
        with pytest.raises(CameraError, match=r"\['wrist'\] captured after the requested time within 0.3 s"):
            rig.read(after=t, timeout=0.3)
        assert time.monotonic() - t < 0.6
    finally:
        stop_all(rig, feed, devs)


def test_a_camera_without_frames_fails_the_read_with_its_reason():
    cams = (CameraConfig(name="front", source="realsense", serial="rig-absent", open_timeout=0,
                         reconnect_interval=0.05),)
    rig = CameraRig(RigConfig(cameras=cams, sync_timeout=0.1)).start()
    try:
        time.sleep(0.1)
        with pytest.raises(CameraError, match="no RealSense with serial rig-absent"):
            rig.read()
    finally:
        rig.stop()
