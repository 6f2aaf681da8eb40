"""Camera path speed: what a camera costs the control loop and how fast the capture threads keep up.

    python benchmarks/camera_speed.py [--seconds 3] [--size 480x640] [--side 128] [--out RESULT.json]

Rows (markdown table):
- crop/resize: ``crop_resize`` + BGR->RGB of one captured frame to ``side x side`` (OpenCV INTER_AREA), per frame;
- JPEG decode: ``cv2.imdecode`` of one captured-size JPEG (the ROS CompressedImage path), per frame;
- capture fps: frames a capture thread accepts per second when the source does not limit it (OpenCV replaying an
  MJPG file unpaced, decode + crop/resize included; RealSense software device fed as fast as it takes frames);
- read(): latency of ``Camera.read()`` on the control thread while the capture thread runs at 30 fps;
- rig read(): ``CameraRig.read()`` of two 30 fps cameras (matching + copies of two frames), when in bound.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Table, write_result  # noqa: E402

from robot_rl.cameras import CameraConfig, CameraRig, RigConfig, crop_resize, make_camera  # noqa: E402


def per_call(fn, n: int) -> tuple[float, float]:
    """(median, p99) seconds of ``fn()`` over ``n`` calls."""
    times = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    return float(np.median(times)), float(np.percentile(times, 99))


def write_video(path: Path, h: int, w: int, frames: int = 60) -> Path:
    import cv2

    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (h, w, 3), np.uint8)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30, (w, h))
    for i in range(frames):
        writer.write(np.roll(base, i, axis=1))
    writer.release()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", default="480x640", help="captured frame HxW")
    ap.add_argument("--side", type=int, default=128, help="delivered side (square)")
    ap.add_argument("--out", default=None, help="result file (default: benchmarks/results/camera_speed.json)")
    args = ap.parse_args()
    import cv2

    h, w = (int(v) for v in args.size.split("x"))
    out = (args.side, args.side)
    side = min(h, w)
    crop = ((w - side) // 2, (h - side) // 2, side, side)
    frame = np.random.default_rng(0).integers(0, 255, (h, w, 3), np.uint8)
    table = Table(f"Camera path, {h}x{w} frames to {args.side}x{args.side}", ["measurement", "value", "note"])
    figures: dict = {"size": [h, w], "side": args.side, "seconds": args.seconds}

    med, p99 = per_call(lambda: crop_resize(frame, crop, out)[..., ::-1].copy(), 2000)
    figures["crop_resize_s"] = [med, p99]
    table.add(f"crop {side}x{side} of {h}x{w}, INTER_AREA to {args.side}x{args.side}, BGR->RGB",
              f"{med * 1e6:.0f} us", f"p99 {p99 * 1e6:.0f} us")
    jpeg = cv2.imencode(".jpg", frame)[1]
    med, p99 = per_call(lambda: cv2.imdecode(jpeg, cv2.IMREAD_COLOR), 300)
    figures["jpeg_decode_s"] = [med, p99]
    table.add(f"JPEG decode {h}x{w} (CompressedImage)", f"{med * 1e3:.2f} ms", f"p99 {p99 * 1e3:.2f} ms")

    with tempfile.TemporaryDirectory() as tmp:
        path = write_video(Path(tmp) / "bench.avi", h, w)
        fast = CameraConfig(name="a", device=str(path), fps=100000, loop=True, crop=crop, resize=out, history=2)
        with make_camera(fast) as cam:
            n0, t0 = cam.stats.frames, time.monotonic()
            time.sleep(args.seconds)
            fps = (cam.stats.frames - n0) / (time.monotonic() - t0)
        figures["opencv_capture_fps"] = fps
        table.add(f"capture fps, OpenCV MJPG file {h}x{w} -> {args.side}x{args.side} (unpaced)", f"{fps:.0f} fps",
                  "decode + crop/resize on the capture thread")

        paced = [CameraConfig(name=n, device=str(path), fps=30, loop=True, crop=crop, resize=out)
                 for n in ("front", "wrist")]
        with CameraRig(RigConfig(cameras=tuple(paced), max_skew=0.05, sync_timeout=0.1)) as rig:
            cam = rig.cameras["front"]
            med, p99 = per_call(cam.read, 20000)
            figures["read_s"] = [med, p99]
            table.add("read() while capturing at 30 fps", f"{med * 1e6:.1f} us", f"p99 {p99 * 1e6:.1f} us")
            med, p99 = per_call(rig.read, 2000)
            figures["rig_read_s"] = [med, p99]
            figures["rig_out_of_bound"] = int(rig.stats.out_of_bound)
            table.add(f"rig read(), 2 cameras {args.side}x{args.side}", f"{med * 1e6:.0f} us",
                      f"p99 {p99 * 1e6:.0f} us; out of bound {rig.stats.out_of_bound}/2000")
    for row in realsense_rows(h, w, out, crop, args.seconds, figures):
        table.add(*row)
    print(f"results: {write_result('camera_speed', figures, args.out, tables=[table])}")


def realsense_rows(h: int, w: int, out: tuple[int, int], crop: tuple[int, int, int, int],
                   seconds: float, figures: dict) -> list[tuple[str, str, str]]:
    """The RealSense software-device row; its raw figures go into ``figures``."""
    try:
        from tests.cameras.softcam import SoftRealSense
    except ImportError:  # pyrealsense2 missing
        return [("RealSense", "skipped", "pyrealsense2 not installed")]
    from robot_rl.cameras.realsense import shared_devices

    dev = SoftRealSense("bench", tag=1, width=w, height=h, fps=30).plug(shared_devices())
    cfg = CameraConfig(source="realsense", serial="bench", width=w, height=h, fps=30, crop=crop, resize=out,
                       history=2, open_timeout=0)
    with make_camera(cfg) as cam:
        start, k = time.time(), 0
        while cam.stats.frames == 0 and k < 10000:  # until the camera has opened the device
            dev.inject(start + k * 1e-4)
            k += 1
            time.sleep(0.01)
        n0, k0, t0 = cam.stats.frames, k, time.monotonic()
        while time.monotonic() - t0 < seconds:  # as fast as this thread can inject
            dev.inject(start + k * 1e-4)
            k += 1
        fps = (cam.stats.frames - n0) / (time.monotonic() - t0)
        k -= k0
        stats = cam.stats
    dev.unplug()
    figures.update(realsense_capture_fps=fps, realsense_injected_per_s=k / seconds,
                   realsense_dropped=int(stats.dropped))
    return [(f"capture fps, RealSense software device {h}x{w} rgb8 -> {out[0]}x{out[1]}", f"{fps:.0f} fps",
             f"injected {k / seconds:.0f}/s by one thread (the limit here); dropped {stats.dropped}")]


if __name__ == "__main__":
    main()
