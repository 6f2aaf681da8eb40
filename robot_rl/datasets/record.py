"""Recording demonstrations into datasets in the replay format.

A demo dataset is a replay store (see :mod:`robot_rl.replay.store`) with one partition, ``demos``, written episode
by episode with :class:`~robot_rl.replay.store.EpisodeWriter` (every frame stored once), plus ``dataset.json``:
how it was recorded (env id and kwargs, device, noise, seed) and one record per kept episode (reset seed, length,
return, success label). It loads with ``load_transitions`` or ``robot_rl.replay.add_dataset`` like any store.

Devices produce the actions (:mod:`robot_rl.datasets.sources`): ``scripted`` is the task's privileged-state
expert (``env.unwrapped.expert_action(noise)``) with Gaussian action noise, so demos are not identical;
``keyboard``, ``gamepad``, ``spacemouse`` and ``ros`` are a person on a teleop device (:mod:`robot_rl.teleop`),
paced at the env's control rate. Each attempt starts when the operator is ready (the ready or success key /
button, or an optional countdown), with the robot held until then; the task's own step limit does not apply, a
person sets one in seconds if they want one (shown as time left). The operator labels an attempt with a key or
button (success / failure; it ends there), records it again (reset: discarded, the same placement again), pauses
(the sim stands still, a robot is held; nothing is recorded) or stops the session. An attempt the env ends itself
is labelled by the env's ``is_success``. Stop or Ctrl-C keeps the demos recorded so far.

Reproducibility: the ``k``-th placement of a recording resets the env with ``episode_seed(seed, k)`` (an attempt the
operator records again keeps its placement), and the expert's
noise comes from the env's own generator, so the same seed, task and kwargs give the same dataset (on the same
MuJoCo build). The reset seed of every kept episode is stored, so a state-only episode can be re-simulated.

Atomicity (:mod:`robot_rl.datasets.atomic`): a recording is written under a temporary name beside the target and
renamed when complete, so a crash never leaves a half dataset at the target path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import registry

from robot_rl import __version__ as robot_rl_version
from robot_rl.datasets.atomic import dir_bytes, publish, remove_stale_temps, temp_path
from robot_rl.datasets.sources import (
    DEFAULT_NOISE,
    DEVICES,
    DeviceUnavailableError,
    HumanDevice,
    ScriptedDevice,
    hold_action,
    make_device,
    run_episode,
)
from robot_rl.envs.contract import RobotUnavailable
from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.envs.robot_wait import reset_when_back
from robot_rl.replay.store import EpisodeWriter
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.teleop.config import TeleopConfig
from robot_rl.utils.log import get_logger
from robot_rl.utils.progress import progress_bar
from robot_rl.utils.state_io import atomic_write
from robot_rl.view.config import ViewConfig
from robot_rl.view.live import OperatorView, ViewFrame, copy_cameras

__all__ = ["DEFAULT_NOISE", "DEVICES", "DeviceUnavailableError", "RecordStats", "ScriptedDevice", "dataset_name",
           "ensure_demos", "episode_seed", "make_device", "read_meta", "record_demos", "remove_stale_temps",
           "resolve_env_id"]

log = get_logger(__name__)
DEMO_PARTITION = "demos"
META_FILE = "dataset.json"
META_FORMAT, META_VERSION = "robot_rl.demos", 1
NO_STEP_LIMIT = 10**9
"""A person's recording env: the task's step limit lifted (their own limit is in seconds)."""
EventHook = Callable[[str, dict[str, Any]], None]


def resolve_env_id(name: str) -> str:
    """A gymnasium id from a task name (``reach``, ``PickCube``, ``PickCube-v0``) or an id (returned as is)."""
    if "/" in name or name in registry:
        return name
    import robot_rl_sim  # noqa: F401  (registers the sim tasks)

    tasks = {k.split("/", 1)[1]: k for k in registry if k.startswith("robot_rl/")}
    wanted = name.lower()
    for short, env_id in sorted(tasks.items()):
        if wanted in (short.lower(), short.split("-v")[0].lower()):
            return env_id
    raise ValueError(f"unknown task {name!r}: not a registered gymnasium id and not a sim task "
                     f"(sim tasks: {', '.join(sorted(tasks))})")


def episode_seed(seed: int, attempt: int) -> int:
    """The env reset seed of recording attempt ``attempt`` (independent streams per (seed, attempt))."""
    return int(np.random.SeedSequence([int(seed), int(attempt)]).generate_state(1)[0])


def _kwargs_json(env_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    kwargs = dict(env_kwargs or {})
    try:
        return json.loads(json.dumps(kwargs, sort_keys=True))
    except TypeError as exc:
        raise ValueError(f"env_kwargs must be JSON values (they are stored with the dataset): {exc}") from None


def dataset_name(env_id: str, n: int, seed: int = 0, env_kwargs: Mapping[str, Any] | None = None, *,
                 noise: float = DEFAULT_NOISE, only_successes: bool = True, device: str = "scripted") -> str:
    """``<task>-<n>-seed<seed>[-<kwargs hash>].zarr``, e.g. ``Reach-v0-20-seed0.zarr`` (the name
    :func:`ensure_demos` uses); a non-default noise, kept failures or another device are added to the name."""
    name = f"{env_id.split('/')[-1]}-{n}-seed{seed}"
    if device != "scripted":
        name = f"{env_id.split('/')[-1]}-{device}-{n}-seed{seed}"
    kwargs = _kwargs_json(env_kwargs)
    if kwargs:
        name += "-" + hashlib.sha1(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:8]
    if noise != DEFAULT_NOISE:
        name += f"-noise{noise:g}"
    if not only_successes:
        name += "-withfailures"
    return name + ".zarr"


@dataclass
class RecordStats:
    """What a recording produced."""

    path: Path
    env_id: str
    episodes: int
    attempts: int
    discarded: int
    transitions: int
    seconds: float
    bytes: int
    successes: int = 0
    returns: list[float] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.transitions / max(self.seconds, 1e-9)

    @property
    def bytes_per_episode(self) -> float:
        return self.bytes / max(self.episodes, 1)

    def summary(self) -> str:
        return (f"{self.episodes} demos of {self.env_id} ({self.transitions} transitions, {self.successes} "
                f"successful) -> {self.path}; {self.attempts} attempts, {self.discarded} failed or discarded; "
                f"{self.seconds:.1f} s "
                f"({self.steps_per_second:.0f} steps/s); {self.bytes / 1e6:.2f} MB "
                f"({self.bytes_per_episode / 1e3:.1f} kB per demo)")


def read_meta(path: str | Path) -> dict[str, Any] | None:
    """The ``dataset.json`` of a demo dataset, or None (e.g. a replay store saved by training)."""
    file = Path(path) / META_FILE
    if not file.is_file():
        return None
    meta = json.loads(file.read_text())
    if meta.get("format") != META_FORMAT:
        raise ValueError(f"{file} is not robot_rl demo metadata (format {meta.get('format')!r})")
    return meta


def is_complete(path: str | Path, n: int | None = None) -> bool:
    """True when ``path`` is a finished recording (with ``n`` episodes, if given)."""
    path = Path(path)
    try:
        meta = read_meta(path)
    except (ValueError, OSError):
        return False
    return (meta is not None and bool(meta.get("complete")) and (path / "commit.json").is_file()
            and (n is None or len(meta.get("episodes", [])) == n))


def record_demos(env_id: str, n: int, out_path: str | Path, noise: float = DEFAULT_NOISE, seed: int = 0,
                 only_successes: bool = True, env_kwargs: Mapping[str, Any] | None = None, progress: bool = True,
                 *, device: Any = "scripted", max_attempts: int | None = None, overwrite: bool = False,
                 teleop: TeleopConfig | None = None, rate_hz: float | None = None, success_reward: float = 1.0,
                 on_event: EventHook | None = None, start: float | None = None,
                 episode_seconds: float | None = None, view: ViewConfig | None = None) -> RecordStats:
    """Records ``n`` episodes of ``device`` acting in ``env_id`` into a new dataset at ``out_path``.

    With ``only_successes`` failed episodes are discarded (and counted) until ``n`` succeed or ``max_attempts``
    (scripted: default ``2 n + 10``, which raises RuntimeError; human devices: unlimited) is reached.
    ``out_path`` must not exist unless ``overwrite``; the dataset appears there only when complete.

    ``device``: a device name, or an action source object of your own (``name``, ``human``, ``start(env)``,
    ``reset()``, ``step(env) -> Step``, ``close()``; optional ``observe(obs, info, first)``, told every observation,
    e.g. a policy: robot_rl.vla.distill.PolicyDevice).
    Human devices (``keyboard | gamepad | spacemouse | ros``, configured by ``teleop``) are paced at ``rate_hz``
    (default: the env's control rate; 0 = as fast as possible); a success label sets the last reward to
    ``success_reward``. A person's attempt starts (``start``) on their ready event (None), at once (0) or after a
    countdown of that many seconds; ``episode_seconds`` limits it (None: no limit but the task's own end and the
    operator's labels). ``on_event(kind, info)`` is told ``waiting``, ``countdown``, ``episode_start``, ``tick``,
    ``episode_end``, ``hold`` and ``resume``. The stop event or Ctrl-C while recording from a human keeps the
    episodes already kept (``stopped`` / ``interrupted`` in the metadata). ``view`` (enabled): the live operator
    view, every attempt saved as ``<out>.view/attempt_<k>.rrd`` unless ``view.save_dir`` says otherwise.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if start is not None and start < 0:
        raise ValueError(f"start (countdown seconds) must be >= 0 or None (wait for the ready key), got {start}")
    if episode_seconds is not None and episode_seconds <= 0:
        raise ValueError(f"episode_seconds must be > 0 or None (no limit), got {episode_seconds}")
    dev = make_device(device, noise, teleop) if isinstance(device, str) else device
    env_id = resolve_env_id(env_id)
    kwargs = _kwargs_json(env_kwargs)
    out = Path(out_path)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists (choose another path or overwrite it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)
    tmp = temp_path(out)
    if max_attempts is None and not dev.human:
        max_attempts = 2 * n + 10
    live = None
    if view is not None and view.enabled:
        live = OperatorView(view, "robot_rl record-demos", Path(view.save_dir or out.with_suffix(".view")))
    try:
        stats = _record(dev, env_id, kwargs, n, tmp, noise, seed, only_successes, progress, max_attempts,
                        rate_hz, success_reward, on_event or (lambda kind, info: None), start, episode_seconds, live)
        publish(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if live is not None:
            live.close()
    stats.path = out
    return stats


def _record(dev: ScriptedDevice | HumanDevice, env_id: str, kwargs: dict[str, Any], n: int, tmp: Path,
            noise: float, seed: int, only_successes: bool, progress: bool, max_attempts: int | None,
            rate_hz: float | None, success_reward: float, hook: EventHook, start: float | None,
            episode_seconds: float | None, view: OperatorView | None = None) -> RecordStats:
    began = time.perf_counter()
    # a person's attempt ends when they say so (or at their own limit in seconds), not at the task's step limit
    env = make_env(EnvConfig(id=env_id, kwargs=dict(kwargs), max_episode_steps=NO_STEP_LIMIT if dev.human else None))
    try:
        dev.start(env)
        spec = ObsSpec.from_space(env.observation_space)
        writer = EpisodeWriter(tmp, spec, action_dim_of(env.action_space), partition=DEMO_PARTITION)
        fps = float(env.metadata.get("render_fps") or 20)
        rate = (fps if rate_hz is None else rate_hz) if dev.human else (rate_hz or 0.0)
        meta: dict[str, Any] = {
            "format": META_FORMAT, "version": META_VERSION, "env_id": env_id, "env_kwargs": kwargs,
            "device": dev.name, "noise": None if dev.human else noise, "seed": seed,
            "only_successes": only_successes, "partition": DEMO_PARTITION, "fps": fps,
            "versions": _versions(robot_rl_version), "complete": False, "attempts": 0, "discarded": 0,
            "episodes": []}
        if dev.human:
            env.reset(seed=episode_seed(seed, 0))  # first steps compile/load kernels: not while a person steers
            env.step(hold_action(env))
            meta.update(rate_hz=rate, teleop={k: v for k, v in asdict(dev.cfg).items() if k != "scripted"},
                        start="ready" if start is None else start, episode_seconds=episode_seconds)
        limit = int(np.ceil(episode_seconds * rate)) if dev.human and episode_seconds and rate else None
        attempts = discarded = transitions = placement = 0
        with progress_bar(progress, info=True) as bar:
            # A person at the device gets prompts; a scripted recording stays quiet but for the bar.
            say: Callable[[str], None] = log.info if dev.human else (lambda msg: None)
            task = bar.add_task(f"recording {env_id.split('/')[-1]} ({dev.name})", total=n, info="")
            if dev.human:
                say(f"{dev.name}: {dev.controls()}; stop or Ctrl-C ends the session and keeps the demos so far")
                if limit:
                    say(f"each attempt may last {episode_seconds:g} s ({limit} steps)")

            def notify(kind: str, info: dict[str, Any]) -> None:
                if kind == "started":
                    kind, info = "episode_start", {"attempt": attempts - 1, "kept": len(meta["episodes"])}
                    say(f"attempt {attempts - 1}: go ({len(meta['episodes'])}/{n} kept)")
                elif kind == "waiting":
                    info = {**info, "attempt": attempts - 1}
                    count = info["countdown"]
                    keys = getattr(dev, "ready_keys", lambda: "the ready button")()  # a device object of one's own
                    when = f"ready? press {keys}" if count is None else f"starts in {count:g} s"
                    say(f"attempt {attempts - 1}: {when} ({len(meta['episodes'])}/{n} kept)")
                elif kind == "countdown":
                    say(f"{info['seconds']}")
                elif kind == "tick":
                    bar.update(task, info=f"{attempts} attempts, {discarded} discarded | {info['seconds_left']} s left")
                hook(kind, info)
                if kind == "hold" and not info["connected"]:
                    log.warning("%s disconnected: the robot is held until it is back", dev.name)
                elif kind == "hold":
                    say("paused: the robot is held")
                elif kind == "resume":
                    say("resumed")
            try:
                while len(meta["episodes"]) < n:
                    if max_attempts is not None and attempts >= max_attempts:
                        raise RuntimeError(
                            f"{env_id}: only {len(meta['episodes'])} of {n} demos succeeded in {attempts} "
                            f"attempts (noise {noise}); lower the noise or keep failures")
                    reset_seed = episode_seed(seed, placement)
                    attempts += 1
                    t0 = time.monotonic()
                    show = None
                    if view is not None:
                        view.begin_episode(f"attempt_{attempts - 1:05d}")
                        show = _shower(view, dev.human, t0, {"attempt": attempts - 1, "kept": len(meta["episodes"]),
                                                             "discarded": discarded})
                    try:
                        ep = run_episode(dev, env, reset_seed, 1.0 / rate if rate else 0.0, success_reward, notify,
                                         start=start if dev.human else 0.0, limit_steps=limit, show=show)
                    except RobotUnavailable as exc:  # a stalled robot graph: this placement is recorded again
                        if view is not None:
                            view.end_episode(f"attempt {attempts - 1}: the robot stopped answering")
                        reset_when_back(env, exc, seed=reset_seed)
                        discarded += 1
                        hook("episode_end", {"attempt": attempts - 1, "kept": False, "success": False,
                                             "discarded": True, "length": 0})
                        meta.update(attempts=attempts, discarded=discarded)
                        continue
                    if ep.stopped:
                        if view is not None:
                            view.end_episode("stopped by the operator")
                        attempts -= 1  # the attempt the operator stopped in is not one
                        meta["stopped"] = True
                        say("stopped by the operator")
                        break
                    if not ep.discarded:  # recorded again: the same placement
                        placement += 1
                    keep = not ep.discarded and bool(ep.actions) and (ep.success or not only_successes)
                    if keep:
                        k = len(meta["episodes"])
                        writer.append(ep.observations, np.stack(ep.actions).astype(np.float32),
                                      np.asarray(ep.rewards, np.float32), np.asarray(ep.terminated),
                                      np.asarray(ep.truncated), source="demo", episode_id=k)
                        transitions += len(ep.actions)
                        record = {"episode_id": k, "reset_seed": reset_seed, "length": len(ep.actions),
                                  "return": float(np.sum(ep.rewards)), "success": ep.success, "label": ep.label}
                        if ep.instruction:
                            record["instruction"] = ep.instruction
                        if dev.human:
                            record.update(seconds=round(time.monotonic() - t0, 3), held_steps=ep.held_steps)
                        meta["episodes"].append(record)
                        bar.advance(task)
                    else:
                        discarded += 1
                    outcome = "to record again" if ep.discarded else ("success" if ep.success else "failure")
                    say(f"attempt {attempts - 1}: {outcome} ({ep.label}), {len(ep.actions)} steps, "
                        f"{'kept' if keep else 'not kept'}")
                    if view is not None:
                        by = {"key": "the operator's label", "env": "the task", "time": "the time limit"}
                        view.end_episode(f"attempt {attempts - 1}: {outcome} ({by.get(ep.label, ep.label)}), "
                                         f"{len(ep.actions)} steps, {'kept' if keep else 'not kept'}")
                    hook("episode_end", {"attempt": attempts - 1, "kept": keep, "success": ep.success,
                                         "discarded": ep.discarded, "length": len(ep.actions)})
                    meta.update(attempts=attempts, discarded=discarded)
                    _write_meta(tmp, meta)
                    bar.update(task, info=f"{attempts} attempts, {discarded} discarded")
            except KeyboardInterrupt:
                if not (dev.human and meta["episodes"]):
                    raise
                meta["interrupted"] = True  # a person's demos are precious: keep what was recorded
            except RobotUnavailable as exc:  # it did not come back
                if not meta["episodes"]:
                    raise
                meta["robot_lost"] = str(exc)
                log.error("the robot is gone (%s); the %d demos so far are kept", exc, len(meta["episodes"]))
        meta["complete"] = True
        _write_meta(tmp, meta)
    finally:
        dev.close()
        env.close()
    return RecordStats(path=tmp, env_id=env_id, episodes=len(meta["episodes"]), attempts=attempts,
                       discarded=discarded, transitions=transitions, seconds=time.perf_counter() - began,
                       bytes=dir_bytes(tmp), successes=sum(e["success"] for e in meta["episodes"]),
                       returns=[e["return"] for e in meta["episodes"]])


def _shower(view: OperatorView, human: bool, began: float, progress: dict[str, float]) -> Callable[..., None]:
    """The ``show`` callback of one attempt: its control periods to the operator view (copies of the images)."""

    def show(control: str, obs: Mapping[str, Any], action: np.ndarray, step: int, reward: float | None = None,
             success: bool | None = None, seconds_left: float | None = None) -> None:
        act = np.array(action, np.float32)
        view.frame(ViewFrame(control, time.monotonic() - began, step, copy_cameras(obs),
                             policy_action=None if human else act, person_action=act if human else None,
                             reward=reward, success=success, seconds_left=seconds_left, progress=progress))
    return show


def _versions(robot_rl_version: str) -> dict[str, str]:
    import mujoco  # lazy: MuJoCo only for the version stamp

    return {"robot_rl": robot_rl_version, "mujoco": mujoco.__version__, "gymnasium": gymnasium.__version__}


def _write_meta(path: Path, meta: Mapping[str, Any]) -> None:
    atomic_write(path / META_FILE, lambda f: f.write_text(json.dumps(meta, indent=1)))


def ensure_demos(env_id: str, n: int, seed: int = 0, root: str | Path = "demos",
                 env_kwargs: Mapping[str, Any] | None = None, progress: bool = False) -> Path:
    """``<root>/<task>-<n>-seed<seed>[-<kwargs hash>].zarr``, recorded with the scripted expert on first use.

    Later calls return the existing dataset without touching it. A finished dataset is only ever published by
    an atomic rename, so what sits at the path is complete; anything else there is an error to resolve by hand.
    """
    env_id = resolve_env_id(env_id)
    path = Path(root) / dataset_name(env_id, n, seed, env_kwargs)
    if path.exists():
        if is_complete(path, n):
            return path
        raise ValueError(f"{path} exists but is not a complete {n}-episode demo dataset; delete it to regenerate")
    log.info("recording %d scripted demos of %s into %s (first use: later runs reuse them)", n, env_id, path)
    try:
        record_demos(env_id, n, path, noise=DEFAULT_NOISE, seed=seed, env_kwargs=env_kwargs, progress=progress)
    except FileExistsError:
        if not is_complete(path, n):  # another process published first: use it when it is complete
            raise
    return path
