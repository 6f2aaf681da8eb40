"""Reading a saved operator-view recording back with rerun's own reader: ``rerun.chunk.RrdReader`` (rerun 0.41
on) or ``rerun.dataframe`` (rerun 0.24 to 0.40, the range LeRobot 0.4 installs)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
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
    rows: dict[str, list[tuple[int, Any]]] = {}
    read = _chunk_rows if find_spec("rerun.chunk") is not None else _dataframe_rows
    for entity, frames, columns in read(str(path)):
        entity = entity.lstrip("/")
        if entity.startswith("__"):
            continue
        values = _values(columns)
        if values is not None:
            rows.setdefault(entity, []).extend(zip(frames, values, strict=True))
    out = {}
    for entity, found in rows.items():
        found.sort(key=lambda r: -1 if r[0] is None else r[0])
        out[entity] = Series(np.array([-1 if f is None else f for f, _ in found], np.int64), [v for _, v in found])
    return out


Rows = Iterator[tuple[str, list[int | None], dict[str, list[Any]]]]
"""Per group of rows: entity path, each row's ``frame`` (None: logged without it), {component: each row's value}."""


def _chunk_rows(path: str) -> Rows:
    """One group per chunk, every row as logged (rerun 0.41 on)."""
    from rerun.chunk import RrdReader  # the view extra: optional and heavy

    for chunk in RrdReader(path).stream():
        batch = chunk.to_record_batch()
        names = batch.schema.names
        frames = batch.column("frame").to_pylist() if "frame" in names else [None] * batch.num_rows
        yield chunk.entity_path, frames, {name: batch.column(name).to_pylist() for name in names}


def _dataframe_rows(path: str) -> Rows:
    """The same from rerun's dataframe query (rerun 0.24 to 0.40). A query keeps one row per index value, so each
    column is read on the timeline where its rows are distinct: text events (one ``log`` call each) on
    ``log_tick``; the columns the view sends in batches (scalars, images: one row per frame) on ``frame``."""
    from rerun.dataframe import load_recording  # the view extra: optional and heavy

    recording = load_recording(path)
    components: dict[str, list[str]] = {}
    for column in recording.schema().component_columns():
        if not column.is_static:
            components.setdefault(column.entity_path, []).append(column.component)
    for entity, names in components.items():
        index = "log_tick" if any(n.startswith("TextLog") for n in names) else "frame"
        table = recording.view(index=index, contents={entity: names}).select().read_all()
        found = [n for n in names if f"{entity}:{n}" in table.schema.names]
        columns = {n: table.column(f"{entity}:{n}").to_pylist() for n in found}
        frames = table.column("frame").to_pylist() if "frame" in table.schema.names else [None] * table.num_rows
        kept = [i for i in range(table.num_rows) if any(columns[n][i] is not None for n in found)]
        yield entity, [frames[i] for i in kept], {n: [columns[n][i] for i in kept] for n in found}


def _values(columns: dict[str, list[Any]]) -> list[Any] | None:
    """One value per row of a group's component columns (None: a kind the view does not log)."""
    if "Scalars:scalars" in columns:
        return [np.asarray(v, np.float64) for v in columns["Scalars:scalars"]]
    if "TextLog:text" in columns:
        return [v[0] if v else "" for v in columns["TextLog:text"]]
    if "Image:buffer" in columns and "Image:format" in columns:
        return [_image(b[0], f[0]) for b, f in zip(columns["Image:buffer"], columns["Image:format"], strict=True)]
    return None


def _image(buffer: list[int], fmt: dict[str, Any]) -> np.ndarray:
    data = np.asarray(buffer, np.uint8)
    h, w = int(fmt["height"]), int(fmt["width"])
    return data.reshape(h, w, -1)
