"""``ViewConfig``: whether the operator view runs, where it streams and what it shows (``TrainConfig.view``,
``robot-rl record-demos --view.*``, ``robot-rl eval --view.*``)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

STREAMS = ("cameras", "actions", "control", "reward", "time", "progress")
"""What a view can show (:attr:`ViewConfig.streams`)."""

RERUN_VERSIONS = ((0, 24), (0, 50))
"""The rerun-sdk releases the view runs on: from 0.24 (the lowest LeRobot 0.4 installs) up to, not including,
0.50 (rerun changes its API between 0.x releases), as the ``view`` extra declares."""


def rerun_unusable() -> str | None:
    """Why the view cannot run with the rerun-sdk installed here (missing, or a release outside
    :data:`RERUN_VERSIONS`), or None when it can. Reads the installed version without importing rerun."""
    try:
        found = version("rerun-sdk")
    except PackageNotFoundError:
        return "the operator view needs rerun-sdk: pip install -e '.[view]'"
    (lo_major, lo_minor), (hi_major, hi_minor) = RERUN_VERSIONS
    try:
        major, minor = (int(part) for part in found.split(".")[:2])
    except ValueError:
        return None  # a development build: let it try
    if not (lo_major, lo_minor) <= (major, minor) < (hi_major, hi_minor):
        return (f"the operator view runs on rerun-sdk >= {lo_major}.{lo_minor}, < {hi_major}.{hi_minor}; "
                f"{found} is installed: pip install -e '.[view]'")
    return None


@dataclass(frozen=True)
class ViewConfig:
    """The live operator view in rerun's viewer, and each episode saved as a rerun recording (``.rrd``)."""

    enabled: bool = False
    """Stream the view and save the recordings (needs rerun-sdk: ``pip install -e '.[view]'``)."""
    live: Literal["spawn", "connect", "none"] = "spawn"
    """Where the live view goes: spawn (start rerun's viewer on this machine; without a display only the
    recordings are saved), connect (stream to a viewer already running at ``url``, e.g. ``rerun`` started on the
    operator's workstation), none (only the saved recordings)."""
    url: str = "rerun+http://127.0.0.1:9876/proxy"
    """The viewer that ``live: connect`` streams to (a viewer started with ``rerun`` listens on port 9876)."""
    port: int = 9876
    """Port of the viewer that ``live: spawn`` starts."""
    save: bool = True
    """Save every episode as ``<save_dir>/episode_<k>.rrd`` (open it afterwards with ``rerun FILE``)."""
    save_dir: str = ""
    """Folder of the saved recordings; empty: the command's own (train: ``<run>/view``, record-demos:
    ``<dataset>.view`` beside the dataset, eval: ``<first run>/eval_view``)."""
    streams: tuple[str, ...] = STREAMS
    """What the view shows: cameras (the observation's images), actions (the policy's proposal and the person's
    device), control (who steers: the policy, the person, held, or waiting for the operator's ready), reward
    (reward and success), time (episode time and time left), progress (the run's or the session's). Who is in
    control, takeovers, labels and episode ends are always shown as events."""
    max_queue: int = 64
    """Frames waiting for the view's thread at most; a frame beyond it is dropped (and counted), so the control
    loop never waits for the view."""
    batch_s: float = 0.25
    """The view's thread logs the frames of this many seconds at a time (as columns: far less of its time per
    frame, so less of the interpreter lock the control loop needs); the live view lags by about this much."""

    def validate(self) -> None:
        unknown = sorted(set(self.streams) - set(STREAMS))
        if unknown:
            raise ValueError(f"view.streams: unknown {unknown} (streams: {', '.join(STREAMS)})")
        if self.live not in ("spawn", "connect", "none"):
            raise ValueError(f"view.live must be spawn, connect or none, got {self.live!r}")
        if self.enabled and self.live == "none" and not self.save:
            raise ValueError("view: live none and save false leave the view nothing to do")
        if not 0 < self.batch_s <= 5:
            raise ValueError(f"view.batch_s must be in (0, 5] seconds, got {self.batch_s}")
        if self.max_queue < 1:
            raise ValueError(f"view.max_queue must be >= 1, got {self.max_queue}")
        if not 0 < self.port < 65536:
            raise ValueError(f"view.port must be a TCP port, got {self.port}")
