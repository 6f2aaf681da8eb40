"""Labelled camera frames for the reward classifier: record them (sim or a human with a teleop device), load them.

A frames dataset is a zarr group::

    <out>/zarr.json          attrs: format, version, cameras {name: [H, W, 3]}, how it was recorded, complete
    <out>/pixels/<camera>    uint8 [N, H, W, 3]
    <out>/label              bool [N]   success (True) / failure (False): what the classifier learns
    <out>/env_success        int8 [N]   the env's own info["is_success"] (1/0), -1 where the env has none
    <out>/episode, <out>/step  int32 [N]  which episode and step a frame comes from (splits are by episode)

Two ways to label. ``sim``: the env's ground truth ``info["is_success"]``; the task's scripted expert acts with
noise, broken by random-action segments so that the frames cover failures, successes and the states in between
(a cube lifted just short of the height, dropped again, re-grasped). ``keys``: a person drives with a teleop
device and labels with its events: ``success`` marks this and the following frames successes until ``failure``
(or ``reset``, which also starts a new episode) marks them failures again; ``pause`` stops recording until
pressed again. Recording is written under a temporary name and renamed when complete (as demo datasets are).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

# The demo recorder's atomic publishing: one convention (and stale-temp cleanup) for every dataset folder.
from robot_rl.datasets.atomic import publish, remove_stale_temps, temp_path
from robot_rl.datasets.record import episode_seed, resolve_env_id
from robot_rl.datasets.sources import hold_action
from robot_rl.envs.contract import RobotUnavailable
from robot_rl.envs.held import held_step
from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.envs.robot_wait import reset_when_back
from robot_rl.utils.log import get_logger
from robot_rl.utils.progress import progress_bar

log = get_logger(__name__)

FORMAT, VERSION = "robot_rl.reward_frames", 1
CHUNK = 64  # frames per zarr chunk: the fastest chunk size to write (PLATFORM.md)


class FramesError(ValueError):
    """A frames dataset is missing, incomplete or malformed; the message names what is wrong."""


@dataclass
class SimFramesConfig:
    """How ``record-frames --mode sim`` collects frames labelled by the sim's success check."""

    task: str = "PickCube"
    """Sim task name or gymnasium id (it must have a scripted expert, ``env.unwrapped.expert_action``)."""
    episodes: int = 40
    """Episodes to record (every step of each is a frame)."""
    image_size: int = 64
    """Camera image side in pixels."""
    cameras: tuple[str, ...] = ()
    """Cameras to record (empty: the task's default cameras)."""
    max_episode_steps: int = 80
    """Steps per episode (episodes do not end on success, so successes are held, lost and regained)."""
    noise_max: float = 0.3
    """Each episode's expert action noise std is drawn uniformly from [0, noise_max] (action units)."""
    perturb_max: float = 0.5
    """Each episode draws p in [0, perturb_max]; each segment is then random actions with probability p."""
    segment_steps: tuple[int, int] = (3, 12)
    """Min and max length (steps) of a segment of expert or random actions."""
    seed: int = 0
    """Recording seed: same seed and config, same frames (on the same MuJoCo build)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Further keyword arguments for gymnasium.make (e.g. domain randomisation)."""

    def validate(self) -> None:
        lo, hi = self.segment_steps
        checks = [(self.episodes >= 1, "episodes must be >= 1"), (self.image_size >= 8, "image_size must be >= 8"),
                  (self.max_episode_steps >= 1, "max_episode_steps must be >= 1"),
                  (self.noise_max >= 0, "noise_max must be >= 0"),
                  (0.0 <= self.perturb_max <= 1.0, "perturb_max must be in [0, 1]"),
                  (1 <= lo <= hi, "segment_steps must be (min, max) with 1 <= min <= max")]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"record-frames: {message}")


@dataclass
class FrameSet:
    """A frames dataset in RAM."""

    pixels: dict[str, np.ndarray]
    """camera -> uint8 ``[N, H, W, 3]``."""
    labels: np.ndarray
    """bool ``[N]``."""
    episodes: np.ndarray
    """int32 ``[N]``: the episode of each frame."""
    env_success: np.ndarray
    """int8 ``[N]``: the env's own success (-1 unknown)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """The dataset's attributes (how it was recorded)."""

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass
class FrameStats:
    """What a recording produced."""

    path: Path
    frames: int
    successes: int
    episodes: int
    seconds: float

    def summary(self) -> str:
        pct = 100.0 * self.successes / max(self.frames, 1)
        return (f"{self.frames} frames ({self.successes} success, {pct:.0f} %) from {self.episodes} episodes "
                f"in {self.seconds:.1f} s ({self.frames / max(self.seconds, 1e-9):.0f} frames/s) -> {self.path}")


class FrameWriter:
    """Appends labelled frames to a new dataset under a temporary name; :meth:`publish` renames it into place."""

    def __init__(self, out: str | Path, cameras: Mapping[str, tuple[int, int, int]], meta: Mapping[str, Any],
                 overwrite: bool = False) -> None:
        self.out = Path(out)
        if self.out.exists() and not overwrite:
            raise FileExistsError(f"{self.out} already exists (choose another path or overwrite it)")
        if not cameras:
            raise FramesError("no cameras to record: the env has no pixel observations (set image_size > 0)")
        self.overwrite = overwrite
        self.out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.out)
        self.tmp = temp_path(self.out)
        self.cameras = {k: tuple(int(s) for s in v) for k, v in cameras.items()}
        attrs = {"format": FORMAT, "version": VERSION, "complete": False,
                 "cameras": {k: list(v) for k, v in self.cameras.items()}, **dict(meta)}
        self.root = zarr.open_group(str(self.tmp), mode="w", attributes=attrs)
        pix = self.root.require_group("pixels")
        for cam, shape in self.cameras.items():
            pix.create_array(cam, shape=(0, *shape), dtype=np.uint8, chunks=(CHUNK, *shape))
        for key, dtype in (("label", bool), ("env_success", np.int8), ("episode", np.int32), ("step", np.int32)):
            self.root.create_array(key, shape=(0,), dtype=dtype, chunks=(4096,))
        self._pending: list[tuple[dict[str, np.ndarray], bool, int, int, int]] = []
        self.frames = self.successes = 0
        self.episode_ids: set[int] = set()

    def add(self, pixels: Mapping[str, np.ndarray], label: bool, episode: int, step: int,
            env_success: bool | None = None) -> None:
        """One frame (every camera) with its label."""
        frame = {}
        for cam, shape in self.cameras.items():
            if cam not in pixels:
                raise FramesError(f"observation has no camera {cam!r} (has {sorted(pixels)})")
            img = np.asarray(pixels[cam])
            if img.shape != shape or img.dtype != np.uint8:
                raise FramesError(f"camera {cam!r}: expected uint8 {shape}, got {img.dtype} {img.shape}")
            frame[cam] = img.copy()
        env_flag = -1 if env_success is None else int(bool(env_success))
        self._pending.append((frame, bool(label), int(episode), int(step), env_flag))
        self.frames += 1
        self.successes += int(bool(label))
        self.episode_ids.add(int(episode))
        if len(self._pending) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        for cam in self.cameras:
            self.root[f"pixels/{cam}"].append(np.stack([p[0][cam] for p in self._pending]), axis=0)
        for i, key in enumerate(("label", "episode", "step", "env_success"), start=1):
            self.root[key].append(np.asarray([p[i] for p in self._pending], dtype=self.root[key].dtype), axis=0)
        self._pending.clear()

    def publish(self, extra_meta: Mapping[str, Any] | None = None) -> Path:
        """Flushes, marks the dataset complete, fsyncs and renames it to ``out``."""
        self.flush()
        if self.frames == 0:
            raise FramesError("no frames were recorded; nothing to save")
        self.root.attrs.update({**dict(extra_meta or {}), "complete": True, "frames": self.frames,
                                "successes": self.successes, "episodes": len(self.episode_ids)})
        publish(self.tmp, self.out, self.overwrite)
        return self.out

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _cameras_of(obs: Mapping[str, Any]) -> dict[str, tuple[int, int, int]]:
    pixels = obs.get("pixels") if isinstance(obs, Mapping) else None
    if not pixels:
        raise FramesError("the env's observations have no 'pixels' (cameras); a sim task needs image_size > 0")
    return {cam: tuple(np.asarray(img).shape) for cam, img in pixels.items()}  # type: ignore[misc]


def record_sim_frames(cfg: SimFramesConfig, out: str | Path, progress: bool = True,
                      overwrite: bool = False) -> FrameStats:
    """Records ``cfg.episodes`` episodes of a sim task, each frame labelled with the sim's success check."""
    cfg.validate()
    env_id = resolve_env_id(cfg.task)
    kwargs = {**cfg.env_kwargs, "image_size": cfg.image_size, "terminate_on_success": False}
    if cfg.cameras:
        kwargs["cameras"] = tuple(cfg.cameras)
    env = make_env(EnvConfig(id=env_id, kwargs=kwargs, max_episode_steps=cfg.max_episode_steps))
    start = time.perf_counter()
    writer = None
    try:
        if not callable(getattr(env.unwrapped, "expert_action", None)):
            raise FramesError(f"{env_id} has no scripted expert (env.unwrapped.expert_action); sim mode needs one")
        lo, hi = cfg.segment_steps
        with progress_bar(progress, info=True) as bar:
            task = bar.add_task(f"frames {env_id.split('/')[-1]}", total=cfg.episodes, info="")
            for ep in range(cfg.episodes):
                seed = episode_seed(cfg.seed, ep)
                rng = np.random.default_rng(seed)
                obs, info = env.reset(seed=seed)
                if writer is None:
                    meta = {"mode": "sim", "env_id": env_id, "env_kwargs": _jsonable(kwargs), "seed": cfg.seed,
                            "config": _jsonable(cfg.__dict__)}
                    writer = FrameWriter(out, _cameras_of(obs), meta, overwrite)
                noise, p_random = rng.uniform(0, cfg.noise_max), rng.uniform(0, cfg.perturb_max)
                writer.add(obs["pixels"], bool(info.get("is_success", False)), ep, 0, info.get("is_success"))
                step, seg_left, random_action = 0, 0, None
                while True:
                    if seg_left == 0:  # a new segment: the expert, or one random action held for a while
                        seg_left = int(rng.integers(lo, hi + 1))
                        random_action = (rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
                                         if rng.random() < p_random else None)
                    seg_left -= 1
                    action = (random_action if random_action is not None
                              else np.asarray(env.unwrapped.expert_action(noise), np.float32))
                    obs, _r, term, trunc, info = env.step(action)
                    step += 1
                    success = bool(info.get("is_success", False))
                    writer.add(obs["pixels"], success, ep, step, success)
                    if term or trunc:
                        break
                bar.advance(task)
                bar.update(task, info=f"{writer.frames} frames, {100 * writer.successes / writer.frames:.0f} % success")
        assert writer is not None
        path = writer.publish()
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    finally:
        env.close()
    return FrameStats(path, writer.frames, writer.successes, cfg.episodes, time.perf_counter() - start)


def record_key_frames(env: Any, device: Any, out: str | Path, max_frames: int = 2000, max_episodes: int = 0,
                      progress: bool = True, overwrite: bool = False, meta: Mapping[str, Any] | None = None,
                      on_step: Any = None) -> FrameStats:
    """Records frames while a person drives ``env`` with ``device`` (a TeleopDevice) and labels with its events.

    The device's action runs while it is ``active``; otherwise (and while disconnected or paused) the robot holds
    still. Stops after ``max_frames`` frames or ``max_episodes`` episodes (0: no limit) or on Ctrl-C, which keeps
    (publishes) what was recorded. A robot that stops answering is waited for (envs/robot_wait.py) and the episode
    starts again; one that does not come back ends the recording, keeping what was labelled. ``on_step(frames,
    label)`` is called after every step (e.g. to show the label).
    """
    start = time.perf_counter()
    obs, info = env.reset()
    writer = FrameWriter(out, _cameras_of(obs), {"mode": "keys", "device": type(device).__name__, **dict(meta or {})},
                         overwrite)
    label, paused, episode, step, lost = False, False, 0, 0, ""
    try:
        with progress_bar(progress, info=True) as bar:
            task = bar.add_task("frames (keys)", total=max_frames, info="label: failure")
            try:
                while writer.frames < max_frames and (max_episodes <= 0 or episode < max_episodes):
                    reading = device.read()
                    events = set(reading.events)
                    if "pause" in events:
                        paused = not paused
                    if "success" in events:
                        label = True
                    if "failure" in events:
                        label = False
                    if "reset" in events:
                        episode, step, label = episode + 1, 0, False
                        obs, info = env.reset()
                        if hasattr(device, "reset"):
                            device.reset()
                        continue
                    if reading.active and reading.connected and not paused:
                        action = np.asarray(reading.action, np.float32)
                    else:
                        action = hold_action(env)
                    try:
                        if paused or not reading.connected:  # held: not one of the episode's steps (envs/held.py)
                            obs, _r, info = held_step(env, action)
                            term = trunc = False
                        else:
                            obs, _r, term, trunc, info = env.step(action)
                            step += 1
                    except RobotUnavailable as exc:  # a stalled robot graph: the frames so far stay
                        obs, info = reset_when_back(env, exc)
                        episode, step, label = episode + 1, 0, False
                        if hasattr(device, "reset"):
                            device.reset()
                        continue
                    if not paused and reading.connected:
                        writer.add(obs["pixels"], label, episode, step, info.get("is_success"))
                        bar.update(task, completed=writer.frames,
                                   info=f"label: {'SUCCESS' if label else 'failure'}, {writer.successes} success")
                    if on_step is not None:
                        on_step(writer.frames, label)
                    if term or trunc:
                        episode, step, label = episode + 1, 0, False
                        obs, info = env.reset()
            except KeyboardInterrupt:
                pass  # a person ends the session: keep what was labelled
            except RobotUnavailable as exc:  # it did not come back: keep what was labelled, say so
                lost = str(exc)
                log.error("the robot is gone (%s); the %d frames so far are kept", exc, writer.frames)
        path = writer.publish({"episodes_seen": episode, **({"robot_lost": lost} if lost else {})})
    except BaseException:
        writer.discard()
        raise
    return FrameStats(path, writer.frames, writer.successes, len(writer.episode_ids), time.perf_counter() - start)


def load_frames(path: str | Path, cameras: tuple[str, ...] = ()) -> FrameSet:
    """Reads a frames dataset into RAM (only ``cameras``, default all), checking what it reads."""
    path = Path(path)
    if not path.exists():
        raise FramesError(f"no frames dataset at {path}")
    try:
        root = zarr.open_group(str(path), mode="r")
    except Exception as exc:  # zarr raises several types for a folder that is not a group
        raise FramesError(f"{path} is not a zarr frames dataset: {exc}") from None
    attrs = dict(root.attrs)
    if attrs.get("format") != FORMAT:
        raise FramesError(f"{path} is not a reward frames dataset (format {attrs.get('format')!r}, "
                          f"expected {FORMAT!r}; record one with `robot-rl record-frames`)")
    if not attrs.get("complete"):
        raise FramesError(f"{path} is an incomplete recording")
    known = dict(attrs.get("cameras") or {})
    wanted = tuple(cameras) or tuple(sorted(known))
    missing = [c for c in wanted if c not in known]
    if missing:
        raise FramesError(f"{path} has no camera(s) {missing} (has {sorted(known)})")
    n = int(attrs.get("frames", -1))
    out: dict[str, np.ndarray] = {}
    for key in ("label", "episode", "env_success"):
        if key not in root or root[key].shape != (n,):
            raise FramesError(f"{path}: array {key!r} missing or not of length {n}")
        out[key] = np.asarray(root[key][:])
    pixels = {}
    for cam in wanted:
        arr = root.get(f"pixels/{cam}")
        if arr is None or arr.shape != (n, *known[cam]) or arr.dtype != np.uint8:
            raise FramesError(f"{path}: pixels/{cam} should be uint8 {(n, *known[cam])}, found "
                              f"{None if arr is None else (arr.dtype, arr.shape)}")
        pixels[cam] = np.asarray(arr[:])
    return FrameSet(pixels, out["label"].astype(bool), out["episode"].astype(np.int32),
                    out["env_success"].astype(np.int8), attrs)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)
