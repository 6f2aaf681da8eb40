"""Reading a saved operator-view recording back with rerun's own reader (``rerun.chunk.RrdReader``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Series:
    """One entity of a recording: its rows in ``frame`` order."""

    frames: np.ndarray
    """int64 ``[N]``: the ``frame`` timeline of each row (-1 for rows logged without it)."""
    values: list[Any]
    """Per row: a float64 array (scalars), a string (text) or a uint8 ``[H, W, C]`` image."""

    def __len__(self) -> int:
        return len(self.values)

    def scalars(self) -> np.ndarray:
        """The rows as a float64 ``[N, D]`` array (scalar entities)."""
        return np.stack(self.values) if self.values else np.zeros((0, 0))


def read_recording(path: str | Path) -> dict[str, Series]:
    """Entity path (without the leading ``/``) -> :class:`Series`, for every entity of the first recording in
    ``path`` (rerun's own properties left out)."""
    from rerun.chunk import RrdReader  # the view extra: optional and heavy

    rows: dict[str, list[tuple[int, Any]]] = {}
    for chunk in RrdReader(str(path)).stream():
        entity = chunk.entity_path.lstrip("/")
        if entity.startswith("__"):
            continue
        batch = chunk.to_record_batch()
        names = batch.schema.names
        n = batch.num_rows
        frames = batch.column("frame").to_pylist() if "frame" in names else [-1] * n
        if "Scalars:scalars" in names:
            values = [np.asarray(v, np.float64) for v in batch.column("Scalars:scalars").to_pylist()]
        elif "TextLog:text" in names:
            values = [v[0] if v else "" for v in batch.column("TextLog:text").to_pylist()]
        elif "Image:buffer" in names:
            buffers, formats = batch.column("Image:buffer").to_pylist(), batch.column("Image:format").to_pylist()
            values = [_image(b[0], f[0]) for b, f in zip(buffers, formats, strict=True)]
        else:
            continue
        rows.setdefault(entity, []).extend(zip(frames, values, strict=True))
    out = {}
    for entity, found in rows.items():
        found.sort(key=lambda r: -1 if r[0] is None else r[0])
        out[entity] = Series(np.array([-1 if f is None else f for f, _ in found], np.int64), [v for _, v in found])
    return out


def _image(buffer: list[int], fmt: dict[str, Any]) -> np.ndarray:
    data = np.asarray(buffer, np.uint8)
    h, w = int(fmt["height"]), int(fmt["width"])
    return data.reshape(h, w, -1)
