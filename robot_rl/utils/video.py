"""Episode videos: ``write_video(frames, path, fps)`` writes an animated GIF or an H.264 MP4, chosen by suffix.

GIF goes through Pillow (via imageio); MP4 through PyAV directly, whose wheels bundle FFmpeg with libx264, so no
system package is needed; an MP4 is encoded in memory, then written by Python, so a full disk is an error, never a
cut file. Frames are uint8 ``[T, H, W, 3]`` (or ``[T, H, W]`` grey). The file appears atomically: it is written
under a temporary name beside ``path`` and renamed when complete.

Format notes: GIF frame delays have a 10 ms resolution (20 fps = 50 ms is exact), and Pillow merges identical
consecutive frames into one longer frame, so a GIF can hold fewer frames than written while playing for the
same time. MP4 (yuv420p, for browsers and players) needs even sides: odd frames are padded by one edge pixel.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import imageio.v3 as iio
import numpy as np

VIDEO_SUFFIXES = (".gif", ".mp4")


def _as_frames(frames: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    arr = np.asarray(frames) if isinstance(frames, np.ndarray) else np.stack([np.asarray(f) for f in frames])
    if arr.ndim == 3:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    if arr.ndim != 4 or arr.shape[-1] not in (3, 4) or len(arr) == 0:
        raise ValueError(f"frames must be [T, H, W, 3] (T >= 1), got shape {arr.shape}")
    if arr.dtype != np.uint8:
        raise ValueError(f"frames must be uint8, got {arr.dtype}")
    return np.ascontiguousarray(arr[..., :3])


def upscale(frames: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour enlargement of ``[T, H, W, C]`` frames by an integer factor (tiny camera images)."""
    if factor <= 1:
        return frames
    return frames.repeat(factor, axis=1).repeat(factor, axis=2)


def write_video(frames: Sequence[np.ndarray] | np.ndarray, path: str | Path, fps: float = 20.0) -> Path:
    """Writes ``frames`` to ``path`` (``.gif`` or ``.mp4``) at ``fps``; returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"video file {path}: unsupported suffix {path.suffix!r} (use {' or '.join(VIDEO_SUFFIXES)})")
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    arr = _as_frames(frames)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{suffix}")
    try:
        if suffix == ".gif":
            iio.imwrite(tmp, arr, plugin="pillow", duration=max(10, int(round(1000.0 / fps, -1))), loop=0)
        else:
            pad_h, pad_w = arr.shape[1] % 2, arr.shape[2] % 2
            if pad_h or pad_w:
                arr = np.pad(arr, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
            _write_mp4(arr, tmp, fps)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:  # name the file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


def _write_mp4(arr: np.ndarray, path: Path, fps: float) -> None:
    """H.264 (libx264, yuv420p) at ``fps``, encoded in memory and then written by Python: FFmpeg's own file writes
    drop errors (a full disk would leave a cut file that looks complete)."""
    import av  # lazy: PyAV loads FFmpeg, for videos only

    buffer = io.BytesIO()
    container = av.open(buffer, "w", format="mp4")
    try:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = arr.shape[2], arr.shape[1], "yuv420p"
        for frame in arr:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())  # flush the encoder
    except BaseException:
        with contextlib.suppress(Exception):  # the write's own error is the one to report
            container.close()
        raise
    container.close()  # writes the trailer: its error, if any, is this video's
    with open(path, "wb") as f:
        f.write(buffer.getbuffer())


def read_video(path: str | Path) -> np.ndarray:
    """All frames of a GIF or MP4 as uint8 ``[T, H, W, 3]`` (for checks and tests)."""
    path = Path(path)
    if path.suffix.lower() == ".gif":
        frames = iio.imread(path, index=None, plugin="pillow", mode="RGB")
    else:
        frames = iio.imread(path, plugin="pyav")
    return np.asarray(frames)
