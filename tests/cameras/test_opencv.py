"""OpenCV cameras on a video file the test writes (MJPG .avi through cv2.VideoWriter), read back through
``cv2.VideoCapture`` exactly as a recorded session is replayed: frames, crop/resize, colour order, timestamps,
end of file as a disconnect and reopening, a missing device."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2", reason="opencv not installed (pip install -e '.[cameras]')")

from robot_rl.cameras import CameraConfig, CameraError, make_camera  # noqa: E402
from tests.cameras.softcam import wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def write_video(path: Path, frames: int, fps: float = 50.0, size: tuple[int, int] = (48, 64)) -> Path:
    """Left half red, right half blue (RGB), a grey level that changes with the frame index in the top rows."""
    h, w = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    assert writer.isOpened()
    for i in range(frames):
        bgr = np.zeros((h, w, 3), np.uint8)
        bgr[:, : w // 2] = (0, 0, 255)
        bgr[:, w // 2:] = (255, 0, 0)
        bgr[:8] = (i * 8) % 256
        writer.write(bgr)
    writer.release()
    return path


def test_file_replay_crop_resize_rgb_monotonic_and_nonblocking_read(tmp_path):
    path = write_video(tmp_path / "cam.avi", frames=15)
    # Crop the blue right half below the grey rows, resize to 16x16; loop: 15 frames at 100 fps replay in 0.15 s.
    cfg = CameraConfig(name="front", device=str(path), fps=100, loop=True, crop=(32, 8, 32, 40), resize=(16, 16))
    stamps = []
    with make_camera(cfg) as cam:
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            _, t = cam.read()
            if not stamps or t != stamps[-1]:
                stamps.append(t)
            time.sleep(0.003)
        t0 = time.perf_counter()
        for _ in range(2000):
            frame, t = cam.read()
        read_s = (time.perf_counter() - t0) / 2000
        staleness = cam.staleness()
        stats = cam.stats
    assert frame.shape == (16, 16, 3) and frame.dtype == np.uint8 and not frame.flags.writeable
    assert frame[..., 2].min() > 200 and frame[..., 0].max() < 60, "crop of the blue half, delivered as RGB"
    assert len(stamps) >= 20 and np.all(np.diff(stamps) > 0), "timestamps must increase strictly"
    assert stats.frames > 15 and stats.disconnects == 0, f"loop must replay past the end: {stats}"
    assert read_s < 200e-6, f"read() took {read_s * 1e6:.0f} us"
    assert staleness < 0.1


def test_end_of_file_is_a_disconnect_and_the_file_is_reopened(tmp_path):
    path = write_video(tmp_path / "cam.avi", frames=25)  # 0.5 s at 50 fps
    cfg = CameraConfig(device=str(path), fps=50, frame_timeout=0.3, reconnect_interval=0.05)
    with make_camera(cfg) as cam:
        _, t_first = cam.read()
        away = path.rename(tmp_path / "away.avi")  # the open capture keeps its file; reopening will not find it
        assert wait_until(lambda: cam.stats.failed_opens >= 2, 5), cam.stats
        stats = cam.stats
        assert stats.disconnects == 1 and not stats.connected and stats.reconnects == 0
        assert "no such file or device" in stats.last_error and str(path) in stats.last_error
        _, t_last = cam.read()
        away.rename(path)
        assert wait_until(lambda: cam.stats.reconnects == 1, 5), cam.stats
        assert wait_until(lambda: cam.read()[1] > t_last, 2)
        stats = cam.stats
    assert t_last > t_first and stats.frames > 25 and stats.connected


def test_missing_device_is_a_clear_error_and_never_blocks(tmp_path):
    missing = tmp_path / "nope.avi"
    cfg = CameraConfig(device=str(missing), open_timeout=0.3, reconnect_interval=0.05)
    with pytest.raises(CameraError, match="no such file or device") as err:
        make_camera(cfg).start()
    assert str(missing) in str(err.value) and "opencv camera 'front'" in str(err.value)
    with pytest.raises(CameraError, match="no such file or device: /dev/video99"):
        make_camera(replace(cfg, device="/dev/video99")).start()
    # Without waiting at start: read() answers at once while the camera keeps reporting why it cannot open.
    with make_camera(replace(cfg, open_timeout=0)) as cam:
        t0 = time.perf_counter()
        assert cam.read() == (None, None)
        assert time.perf_counter() - t0 < 0.01
        assert wait_until(lambda: cam.stats.failed_opens >= 2, 3)
        assert not cam.stats.connected and cam.staleness() == float("inf")
        assert "no such file or device" in cam.stats.last_error
