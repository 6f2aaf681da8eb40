"""The operator view: frames from a control loop to rerun, logged on a thread of its own.

The loop calls :meth:`OperatorView.frame` once per control period with a :class:`ViewFrame` (its own copies of the
arrays: the view keeps them until they are logged). That call only puts the frame on a queue; a background thread
logs the frames with rerun-sdk, ``view.batch_s`` seconds of them at a time as columns (one call per entity rather
than per frame and entity: a few times less of the thread's time, and so of the interpreter lock the control loop
needs), and rerun's own threads encode and send them. When the thread falls ``max_queue`` frames behind, new
frames are dropped (and counted) rather than queued, so the loop never waits for the view. Episode boundaries and
events (takeovers, labels) are never dropped.

Each episode is one rerun recording: streamed to the live viewer (``view.live``) and saved as
``<save_dir>/<name>.rrd``. Entities:

=====================  =====================================================================  ============
entity                 what                                                                   stream
=====================  =====================================================================  ============
``camera/<name>``      the observation's image                                                cameras
``action/policy``      the policy's proposal (or a scripted source's action), one series per  actions
                       action dimension
``action/person``      the person's device action                                             actions
``control/person``     1 while the person steers, else 0                                      control
``reward``             the step's reward                                                      reward
``success``            1 once the task (or the operator's label) says success                 reward
``time/episode_s``     seconds since the episode started                                      time
``time/left_s``        seconds left of the operator's limit                                   time
``progress/<what>``    the run's progress (env steps, episodes, demos kept, ...), once per    progress
                       batch
``episode/step``       the episode's step a frame recorded (absent while held or waiting)     always
``events``             who took control, labels, the episode's end                            always
=====================  =====================================================================  ============

Timelines: ``frame`` (the control periods shown, from 0 per episode) and ``episode_time``.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.utils.log import get_logger
from robot_rl.view.config import ViewConfig, rerun_unusable

log = get_logger(__name__)

CONTROL = {"policy": "the policy acts", "person": "the person steers", "held": "held (paused or device gone)",
           "waiting": "waiting for the operator's ready"}
"""Who is in control of a frame, and how the view says it."""


class ViewUnavailableError(ValueError):
    """The view cannot run here (rerun-sdk missing, or a release it does not run on): a config that asks for what
    is not installed."""


@dataclass(frozen=True)
class ViewFrame:
    """One control period as the operator sees it. Arrays are the caller's own copies (the view keeps them)."""

    control: str
    """Who acts: policy | person | held (paused, device gone) | waiting (for the operator's ready)."""
    episode_s: float
    """Seconds since the episode started."""
    step: int = -1
    """The episode step this period recorded; -1 when it recorded none (held, waiting)."""
    cameras: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Camera name -> uint8 ``[H, W, 3]``."""
    policy_action: np.ndarray | None = None
    """The policy's proposal (or a scripted source's action)."""
    person_action: np.ndarray | None = None
    """The person's device action."""
    reward: float | None = None
    success: bool | None = None
    seconds_left: float | None = None
    """Of the operator's time limit (None: no limit)."""
    progress: Mapping[str, float] = field(default_factory=dict)
    """The run's or the session's progress, e.g. ``{"env_steps": 1200, "episodes": 14}``."""


def copy_cameras(obs: Mapping[str, Any], index: int | None = None) -> dict[str, np.ndarray]:
    """The observation's camera images (row ``index`` of a batched observation), copied: an env may reuse its
    buffers while the view still holds the frame."""
    pixels = obs.get("pixels") if isinstance(obs, Mapping) else None
    if not pixels:
        return {}
    return {k: np.array(v if index is None else v[index]) for k, v in pixels.items()}


def _has_display() -> bool:
    return sys.platform != "linux" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class OperatorView:
    """The live view of one session (a recording, a run's actor, an evaluation).

    ``app`` names it in the viewer (e.g. ``robot_rl train``); ``save_dir`` is where the recordings go when
    ``cfg.save`` (None: not saved). Use :meth:`begin_episode`, :meth:`frame` (every control period),
    :meth:`event`, :meth:`end_episode` and finally :meth:`close`; none of them blocks."""

    def __init__(self, cfg: ViewConfig, app: str, save_dir: str | Path | None = None) -> None:
        cfg.validate()
        problem = rerun_unusable()
        if problem is not None:
            raise ViewUnavailableError(problem)
        import rerun as rr  # the view extra: optional and heavy, loaded only when a view is made
        self._rr = rr
        self.cfg, self.app = cfg, app
        self.save_dir = Path(save_dir) if cfg.save and save_dir is not None else None
        if self.save_dir is not None:
            self.save_dir.mkdir(parents=True, exist_ok=True)
        self.url = self._live_url()
        self.files: list[Path] = []
        """The recordings saved so far (complete once :meth:`close` returned)."""
        self.dropped = 0
        """Frames dropped because the view's thread was ``max_queue`` frames behind."""
        self._sent = self._done = 0  # frames queued / handled: each written by one thread only
        self._queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._rec: Any = None
        self._name = ""
        self._frames = 0
        self._control = ""
        self._last_s = 0.0
        self._failed = self.url is None and self.save_dir is None
        if self._failed:
            log.warning("view: no viewer to stream to and saving is off: the view shows nothing")
        self._thread = threading.Thread(target=self._run, name="operator-view", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the control loop's side (never blocks)
    def begin_episode(self, name: str) -> None:
        """Starts a recording called ``name`` (its file: ``<save_dir>/<name>.rrd``); ends the one before."""
        self._queue.put(("begin", name))

    def frame(self, frame: ViewFrame) -> bool:
        """Queues one control period; False when it was dropped (the view's thread is behind)."""
        if self._sent - self._done >= self.cfg.max_queue:
            self.dropped += 1
            return False
        self._sent += 1
        self._queue.put(("frame", frame))
        return True

    def event(self, text: str) -> None:
        """A line in the episode's ``events`` (never dropped)."""
        self._queue.put(("event", text))

    def end_episode(self, text: str = "") -> None:
        """Ends the current recording, with ``text`` (e.g. its label) as its last event; the file is complete."""
        self._queue.put(("end", text))

    def close(self, timeout: float = 30.0) -> None:
        """Logs what is queued, completes the last recording and stops the thread."""
        if self._thread.is_alive():
            self._queue.put(("stop", None))
            self._thread.join(timeout)

    @property
    def shown(self) -> int:
        """Frames logged so far."""
        return self._done

    # ------------------------------------------------------------------ the view's thread
    def _live_url(self) -> str | None:
        cfg, rr = self.cfg, self._rr
        if cfg.live == "connect":
            return cfg.url
        if cfg.live == "none":
            return None
        if not _has_display():
            log.warning("view: no display here, so no viewer is started; open the saved recordings with "
                        "`rerun FILE`, or stream to a viewer elsewhere with view.live connect")
            return None
        viewer = shutil.which("rerun") or str(Path(sys.executable).with_name("rerun"))
        try:
            rr.spawn(port=cfg.port, connect=False, hide_welcome_screen=True, executable_path=viewer,
                     recording=rr.RecordingStream(self.app))
        except Exception as exc:  # noqa: BLE001 - a viewer that cannot start must not stop the session
            log.warning("view: could not start rerun's viewer (%s); recordings are still saved", exc)
            return None
        return f"rerun+http://127.0.0.1:{cfg.port}/proxy"

    def _run(self) -> None:
        pending: list[ViewFrame] = []
        began = time.monotonic()
        while True:
            # frames are logged in batches of batch_s seconds: rerun's columns, far less work per frame than a call
            # per frame and entity
            wait = max(0.0, self.cfg.batch_s - (time.monotonic() - began)) if pending else None
            try:
                kind, item = self._queue.get(timeout=wait)
            except queue.Empty:
                kind, item = "flush", None
            if kind == "frame":
                pending.append(item)
                if len(pending) < self.cfg.max_queue and time.monotonic() - began < self.cfg.batch_s:
                    continue
            if pending:
                self._guarded(self._log_frames, pending)
                self._done += len(pending)
                pending = []
            began = time.monotonic()
            if kind == "begin":
                self._guarded(self._finish, "")
                self._name, self._frames, self._control = item, 0, ""
            elif kind == "event":
                self._guarded(self._log_event, item)
            elif kind == "end":
                self._guarded(self._finish, item)
            elif kind == "stop":
                self._guarded(self._finish, "")
                return

    def _guarded(self, fn: Any, arg: Any) -> None:
        if self._failed and fn != self._finish:
            return
        try:
            fn(arg)
        except Exception as exc:  # noqa: BLE001 - the view is for the person; the session goes on without it
            if not self._failed:
                log.warning("view: %s; the view stops, the session goes on", exc)
            self._failed = True

    def _log_event(self, text: str) -> None:
        rec = self._stream(())
        if self._frames:  # at the last frame logged
            rec.set_time("frame", sequence=self._frames - 1)
            rec.set_time("episode_time", duration=self._last_s)
        rec.log("events", self._rr.TextLog(text))

    def _stream(self, cameras: tuple[str, ...]) -> Any:
        """The current episode's recording, opened on first use (its layout shows ``cameras``)."""
        if self._rec is not None:
            return self._rec
        rr = self._rr
        name = self._name or "episode"
        rec = rr.RecordingStream(self.app, recording_id=uuid.uuid4().hex)
        sinks: list[Any] = []
        if self.url:
            sinks.append(rr.GrpcSink(self.url))
        if self.save_dir is not None:
            path = _free_path(self.save_dir, name)
            sinks.append(rr.FileSink(str(path)))
            self.files.append(path)
        rec.set_sinks(*sinks, default_blueprint=_blueprint(cameras))
        rec.send_recording_name(f"{self.app}: {name}")
        self._rec = rec
        return rec

    def _finish(self, text: str) -> None:
        rec = self._rec
        if rec is None and not text:
            return
        if text and not self._failed:
            self._log_event(text)
            rec = self._rec
        self._rec = None
        if rec is None:
            return
        try:
            rec.flush(timeout_sec=5.0)
        except Exception as exc:  # noqa: BLE001 - a live viewer that went away: the file is still completed
            log.debug("view: flush: %s", exc)
        rec.disconnect()  # completes the file sink's recording

    def _log_frames(self, frames: list[ViewFrame]) -> None:
        """A batch of consecutive frames, one rerun column per entity (events where control changed)."""
        rr, show = self._rr, self.cfg.streams
        rec = self._stream(tuple(frames[0].cameras))
        index = np.arange(self._frames, self._frames + len(frames))
        seconds = np.array([f.episode_s for f in frames], np.float64)
        self._frames += len(frames)
        self._last_s = float(seconds[-1])
        for i, f in enumerate(frames):
            if f.control != self._control:
                rec.set_time("frame", sequence=int(index[i]))
                rec.set_time("episode_time", duration=float(seconds[i]))
                rec.log("events", rr.TextLog(CONTROL.get(f.control, f.control)))
                self._control = f.control

        def send(entity: str, rows: list[int], columns: Any) -> None:
            rec.send_columns(entity, indexes=[rr.TimeColumn("frame", sequence=index[rows]),
                                              rr.TimeColumn("episode_time", duration=seconds[rows])], columns=columns)

        def scalars(entity: str, values: list[tuple[int, Any]]) -> None:
            if values:
                rows = [i for i, _ in values]
                send(entity, rows, rr.Scalars.columns(scalars=np.array([v for _, v in values], np.float64)))

        scalars("episode/step", [(i, f.step) for i, f in enumerate(frames) if f.step >= 0])
        if "cameras" in show:
            for name in dict.fromkeys(name for f in frames for name in f.cameras):
                rows = [i for i, f in enumerate(frames) if name in f.cameras]
                images = [np.asarray(frames[i].cameras[name], np.uint8) for i in rows]
                send(f"camera/{name}", rows, rr.Image.columns(buffer=[im.reshape(-1) for im in images],
                                                              format=[_image_format(rr, im) for im in images]))
        if "actions" in show:
            for entity, field_name in (("action/policy", "policy_action"), ("action/person", "person_action")):
                scalars(entity, [(i, getattr(f, field_name)) for i, f in enumerate(frames)
                                 if getattr(f, field_name) is not None])
        if "control" in show:
            scalars("control/person", [(i, float(f.control == "person")) for i, f in enumerate(frames)])
        if "reward" in show:
            scalars("reward", [(i, f.reward) for i, f in enumerate(frames) if f.reward is not None])
            scalars("success", [(i, float(f.success)) for i, f in enumerate(frames) if f.success is not None])
        if "time" in show:
            scalars("time/episode_s", list(enumerate(seconds)))
            scalars("time/left_s", [(i, f.seconds_left) for i, f in enumerate(frames) if f.seconds_left is not None])
        if "progress" in show:  # changes slowly: the batch's last value
            last = len(frames) - 1
            for what, value in frames[-1].progress.items():
                scalars(f"progress/{what}", [(last, float(value))])


def _image_format(rr: Any, image: np.ndarray) -> Any:
    """rerun's format of a uint8 ``[H, W]`` or ``[H, W, C]`` image (C 1, 3 or 4)."""
    channels = 1 if image.ndim == 2 else image.shape[2]
    model = {1: "L", 3: "RGB", 4: "RGBA"}[channels]
    return rr.components.ImageFormat(width=image.shape[1], height=image.shape[0], color_model=model,
                                     channel_datatype="U8")


def _free_path(folder: Path, name: str) -> Path:
    """``folder/<name>.rrd``, or ``<name>-2.rrd``... when that exists (a resumed run does not overwrite)."""
    path, k = folder / f"{name}.rrd", 2
    while path.exists():
        path, k = folder / f"{name}-{k}.rrd", k + 1
    return path


def _blueprint(cameras: tuple[str, ...]) -> Any:
    """The viewer's layout: cameras on the left; actions, control and reward, progress and events on the right
    (None where this rerun's blueprint API differs: the viewer then lays the entities out itself)."""
    try:
        import rerun.blueprint as rrb  # the view extra, like rerun itself

        left = [rrb.Spatial2DView(origin=f"/camera/{c}", name=c) for c in cameras]
        right = [rrb.TimeSeriesView(origin="/action", name="actions: policy and person"),
                 rrb.TimeSeriesView(contents=["/control/**", "/reward", "/success"], name="control, reward, success"),
                 rrb.TimeSeriesView(contents=["/time/**", "/progress/**"], name="time and progress"),
                 rrb.TextLogView(origin="/events", name="events")]
        layout = rrb.Horizontal(rrb.Vertical(*left), rrb.Vertical(*right)) if left else rrb.Vertical(*right)
        return rrb.Blueprint(layout, collapse_panels=True)
    except Exception:  # noqa: BLE001 - a layout is a convenience
        return None
