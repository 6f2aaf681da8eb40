"""ROS 2 cameras against a real publisher node in another process (own ROS_DOMAIN_ID, localhost discovery):
Image and CompressedImage topics, crop/resize, header-stamp timestamps, publisher restart as unplug/replug."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (pip install -e '.[ros2]')")
pytest.importorskip("cv2", reason="opencv not installed (pip install -e '.[cameras]')")

from robot_rl.cameras import CameraConfig, CameraRig, RigConfig, make_camera  # noqa: E402
from tests.cameras.softcam import wait_until  # noqa: E402
from tests.ros.graph import ROOT, _die_with_parent, ros_env  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(90)]


class Publisher:
    def __init__(self, domain: int, tmp_path, tag: int) -> None:
        self.log = tmp_path / f"pub{tag}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.cameras.ros_pub", "--prefix", "/cam", "--tag", str(tag)],
                env=ros_env(domain), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def ros_cam(name: str, topic: str, **kw) -> CameraConfig:
    return CameraConfig(name=name, source="ros", topic=topic, open_timeout=30.0, reconnect_interval=0.2, **kw)


def test_image_and_compressed_topics_through_a_rig(domain, tmp_path):
    pub = Publisher(domain, tmp_path, tag=7)
    cams = (ros_cam("raw", "/cam/image", crop=(0, 0, 32, 48), resize=(24, 16)),
            ros_cam("jpeg", "/cam/compressed", compressed=True, crop=(40, 0, 24, 48), resize=(24, 16)))
    try:
        with CameraRig(RigConfig(cameras=cams, max_skew=0.005, sync_timeout=0.3, strict=True)) as rig:
            readings = []
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                readings.append(rig.read())
                time.sleep(0.02)
            stats = rig.camera_stats()
    finally:
        assert pub.stop() in (0, -2), pub.log.read_text()[-2000:]
    assert len(readings) >= 20
    for name in ("raw", "jpeg"):
        stamps = [r.stamps[name] for r in readings]
        assert np.all(np.diff(stamps) >= 0) and len(set(stamps)) >= 15, f"{name}: frames must keep coming, in order"
        assert stats[name].frames >= 20 and stats[name].dropped == 0
    # Both topics carry the same header stamp: the rig pairs them exactly.
    assert max(r.skew for r in readings) < 2e-4, [r.skew for r in readings]
    raw, jpeg = readings[-1].pixels["raw"], readings[-1].pixels["jpeg"]
    assert raw.shape == jpeg.shape == (24, 16, 3)
    assert (raw == (7, 0, 100)).all(), "rgb8 Image, left half"
    assert np.abs(jpeg.astype(int) - (0, 200, 0)).max() < 12, "JPEG CompressedImage decoded to RGB, right half"


def test_publisher_restart_is_a_disconnect_then_a_reconnect(domain, tmp_path):
    pub = Publisher(domain, tmp_path, tag=1)
    cam = make_camera(ros_cam("raw", "/cam/image", frame_timeout=0.4))
    try:
        cam.start()
        frame, t_first = cam.read()
        assert frame[0, 0, 0] == 1
        assert wait_until(lambda: cam.stats.frames >= 5, 5)
        assert pub.stop() in (0, -2)
        assert wait_until(lambda: not cam.stats.connected, 3), "a silent topic must count as disconnected"
        assert wait_until(lambda: "no publisher on /cam/image" in cam.stats.last_error, 3), cam.stats
        _, t_last = cam.read()
        assert cam.stats.disconnects == 1 and cam.staleness() > 0.3
        pub = Publisher(domain, tmp_path, tag=2)
        assert wait_until(lambda: cam.stats.reconnects == 1 and cam.read()[0][0, 0, 0] == 2, 30), cam.stats
        _, t_after = cam.read()
    finally:
        cam.stop()
        pub.stop()
    assert t_first < t_last < t_after
