"""Where a recording's actions come from: the scripted expert, or a person on a teleop device.

Every source answers ``step(env) -> Step`` once per control period: the action to run, the operator's events
(success / failure label, reset = discard the attempt and record it again, pause, ready, stop) and ``hold`` (paused
or device disconnected: the robot is held and nothing is recorded). A person's attempt starts when they are ready
(the ready or success key / button, or a countdown) and may have a time limit in seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from robot_rl.envs.contract import INSTRUCTION, drives_hardware
from robot_rl.envs.held import held_step
from robot_rl.spaces import action_dim_of
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.factory import TeleopDeviceError
from robot_rl.teleop.factory import make_device as make_teleop_device

DEFAULT_NOISE = 0.1
DEVICES = ("scripted", "spacemouse", "gamepad", "keyboard", "ros")
HUMAN_DEVICES = DEVICES[1:]
FUNCTION_ORDER = ("gripper", "gripper_close", "gripper_open", "ready", "success", "failure", "reset", "pause", "stop",
                  "takeover")


class DeviceUnavailableError(ValueError):
    """A demo device that is unknown or cannot be opened (not plugged in, library missing, no terminal)."""


@dataclass
class Step:
    """One control period of a source."""

    action: np.ndarray
    events: frozenset[str] = field(default_factory=frozenset)
    hold: bool = False


class ScriptedDevice:
    """The task's scripted expert on privileged sim state, plus Gaussian noise (std ``noise``, action units)."""

    name = "scripted"
    human = False

    def __init__(self, noise: float = DEFAULT_NOISE) -> None:
        if noise < 0:
            raise ValueError(f"noise must be >= 0, got {noise}")
        self.noise = float(noise)

    def start(self, env: Any) -> None:
        if not callable(getattr(env.unwrapped, "expert_action", None)):
            raise ValueError(f"{env.spec.id if env.spec else env}: this env has no scripted expert "
                             "(env.unwrapped.expert_action); --device scripted needs a sim task with one")

    def reset(self) -> None:
        pass

    def step(self, env: Any) -> Step:
        return Step(np.asarray(env.unwrapped.expert_action(self.noise), np.float32))

    def close(self) -> None:
        pass


class HumanDevice:
    """A person on a teleop device (:mod:`robot_rl.teleop`): the device's action every step (zero motion and the
    latched gripper while untouched), its events, and a hold while paused or disconnected."""

    human = True

    def __init__(self, name: str, teleop: TeleopConfig | None = None, device: Any = None) -> None:
        self.name = name
        self.cfg = teleop or TeleopConfig(device=name)
        self.device = device  # opened in start(), when the action size is known, unless given
        self.paused = False
        self.connected = True

    def start(self, env: Any) -> None:
        dim = action_dim_of(env.action_space)
        if self.device is None:
            try:
                self.device = make_teleop_device(self.cfg, dim)
            except TeleopDeviceError as exc:
                raise DeviceUnavailableError(str(exc)) from exc
        if self.device.action_dim != dim:
            raise ValueError(f"{self.name}: device gives {self.device.action_dim}-D actions, the env takes {dim}-D")

    def _bindings(self) -> dict[str, list[str]]:
        """Function -> the buttons / keys bound to it."""
        found: dict[str, list[str]] = {}
        for dev in (self.device, getattr(self.device, "device", None), getattr(self.device, "keyboard", None)):
            for button, function in getattr(getattr(dev, "map", None), "buttons", {}).items():
                found.setdefault(function, []).append(button)
        return found

    def reset(self) -> None:
        self.paused = False
        if hasattr(self.device, "reset"):
            self.device.reset()

    def step(self, env: Any) -> Step:
        reading = self.device.read()
        if "pause" in reading.events:
            self.paused = not self.paused
        self.connected = reading.connected
        if self.paused or not reading.connected:
            return Step(hold_action(env), reading.events, hold=True)
        action = np.asarray(reading.action, np.float32)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"{self.name}: device gave a non-finite action {action}")
        return Step(np.clip(action, -1.0, 1.0), reading.events)

    def controls(self) -> str:
        """The device's bindings for the operator, e.g. ``w/up: +x; ...; enter: success; backspace: record again``."""
        found = self._bindings()
        names = {"reset": "record again", "ready": "start the episode"}
        order = sorted(found, key=lambda f: (f[:1] not in "+-", FUNCTION_ORDER.index(f) if f in FUNCTION_ORDER else 0))
        return "; ".join(f"{'/'.join(found[f])}: {names.get(f, f)}" for f in order) or "no bindings listed"

    def ready_keys(self) -> str:
        """The keys / buttons that start an episode (ready, or success for devices with few buttons)."""
        found = self._bindings()
        return " or ".join("/".join(found[f]) for f in ("ready", "success") if f in found) or "the ready button"

    def close(self) -> None:
        if self.device is not None:
            self.device.close()


def hold_action(env: Any) -> np.ndarray:
    """The env's keep-still action (zeros when it has none)."""
    hold = getattr(env.unwrapped, "hold_action", None)
    return np.asarray(hold(), np.float32) if callable(hold) else np.zeros(env.action_space.shape, np.float32)


def make_device(name: str, noise: float = DEFAULT_NOISE, teleop: TeleopConfig | None = None,
                device: Any = None) -> ScriptedDevice | HumanDevice:
    """The action source called ``name`` (human devices open in ``start``); a clear error for unknown ones."""
    if name == "scripted":
        return ScriptedDevice(noise)
    if name in HUMAN_DEVICES:
        if teleop is not None and teleop.device not in (name, "none"):
            raise DeviceUnavailableError(f"--device {name} but the teleop config says device: {teleop.device}")
        return HumanDevice(name, replace(teleop or TeleopConfig(), device=name), device)
    raise DeviceUnavailableError(f"unknown device {name!r} (devices: {', '.join(DEVICES)})")


def copy_obs(obs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": np.array(obs["state"], np.float32)}
    if "pixels" in obs:
        out["pixels"] = {k: np.array(v) for k, v in obs["pixels"].items()}
    if "instruction" in obs:
        out["instruction"] = np.array(obs["instruction"], np.float32)
    return out


@dataclass
class Episode:
    """What one attempt recorded: T + 1 observations, T of the rest, and how it ended."""

    observations: list[dict[str, Any]]
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    success: bool = False
    label: str = "env"
    discarded: bool = False
    held_steps: int = 0
    instruction: str = ""
    stopped: bool = False
    """The operator ended the session (the attempt is discarded)."""


Show = Callable[..., None]
"""``show(control, obs, action, step, reward=None, success=None, seconds_left=None)``: one control period for the
operator view (``control``: person | policy | held | waiting; ``step``: the recorded step, -1 for none)."""


def run_episode(dev: ScriptedDevice | HumanDevice, env: Any, reset_seed: int, period: float,
                success_reward: float, hook: Callable[[str, dict[str, Any]], None], start: float | None = 0.0,
                limit_steps: int | None = None, show: Show | None = None) -> Episode:
    """One attempt: the device steps the env until the env ends it, the operator labels / discards it, or
    ``limit_steps`` steps were recorded (truncated). ``start``: None waits for the operator's ready (or success)
    event, 0 starts at once, ``s > 0`` counts ``s`` seconds down (ready starts earlier); stop while waiting or
    acting ends the session. ``hook`` is told ``waiting``, ``countdown`` (seconds left), ``started``, ``tick``
    (seconds left of the limit, once a second), ``hold`` and ``resume``; ``show`` (the operator view) every
    control period."""
    obs, info = env.reset(seed=reset_seed)
    dev.reset()
    ep = Episode([copy_obs(obs)], instruction=str(info.get(INSTRUCTION, "")))
    hardware = drives_hardware(env)
    if start != 0 and not _ready(dev, env, ep, period, start, hook, hardware, show):
        ep.discarded = ep.stopped = True
        return ep
    hook("started", {})
    observe = getattr(dev, "observe", None)  # sources that act on observations (a policy)
    if observe is not None:
        observe(obs, info, True)
    holding, tick = False, time.monotonic()
    said_left = None
    while True:
        if period:  # a person needs real time; a late step does not make the next ones hurry
            tick = max(tick + period, time.monotonic() - period)
            time.sleep(max(0.0, tick - time.monotonic()))
        step = dev.step(env)
        if "stop" in step.events:
            ep.discarded = ep.stopped = True
            return ep
        if step.hold != holding:
            holding = step.hold
            hook("hold" if holding else "resume", {"paused": getattr(dev, "paused", False),
                                                   "connected": getattr(dev, "connected", True)})
        if "reset" in step.events:
            ep.discarded, ep.label = True, "key"  # the operator's choice
            return ep
        if step.hold:
            ep.held_steps += 1
            if hardware:  # a robot must be commanded to hold (the sim simply stands still): the held period,
                obs, _, _ = held_step(env, step.action)  # not one of the episode's steps, folds into the last
                ep.observations[-1] = copy_obs(obs)  # transition's next observation
            if show is not None:
                show("held", ep.observations[-1], step.action, -1)
        else:
            obs, reward, term, trunc, info = env.step(step.action)
            if observe is not None:
                observe(obs, info, False)
            ep.observations.append(copy_obs(obs))
            ep.actions.append(np.asarray(step.action, np.float32))
            ep.rewards.append(float(reward))
            ep.terminated.append(bool(term))
            ep.truncated.append(bool(trunc))
            ep.success = bool(info.get("is_success", False))
            if show is not None:
                left = (limit_steps - len(ep.actions)) * period if limit_steps is not None and period else None
                show("person" if dev.human else "policy", ep.observations[-1], step.action, len(ep.actions) - 1,
                     float(reward), ep.success or "success" in step.events, left)
        labels = step.events & {"success", "failure"}
        if labels and ep.actions:  # the operator's label ends the attempt at the last recorded step
            ep.success, ep.label = "success" in labels, "key"
            ep.terminated[-1], ep.truncated[-1] = True, False
            if ep.success:
                ep.rewards[-1] = float(success_reward)
            return ep
        if limit_steps is not None and not step.hold:
            left = int(np.ceil((limit_steps - len(ep.actions)) * period)) if period else None
            if left is not None and left != said_left:
                said_left = left
                hook("tick", {"seconds_left": left})
            if len(ep.actions) >= limit_steps and not (ep.terminated[-1] or ep.truncated[-1]):
                ep.truncated[-1], ep.label = True, "time"  # the operator's time limit
        if ep.actions and (ep.terminated[-1] or ep.truncated[-1]) and not step.hold:
            return ep


def _ready(dev: Any, env: Any, ep: Episode, period: float, start: float | None,
           hook: Callable[[str, dict[str, Any]], None], hardware: bool, show: Show | None = None) -> bool:
    """Waits, the robot held, for the operator's ready (or success) event or the countdown's end: True; stop:
    False. Nothing is recorded meanwhile (a robot's held state becomes the episode's first observation)."""
    hook("waiting", {"countdown": start})
    deadline = None if start is None else time.monotonic() + start
    said = None
    while True:
        time.sleep(period or 0.02)
        step = dev.step(env)
        if "stop" in step.events:
            return False
        if show is not None:
            show("waiting", ep.observations[-1], step.action, -1)
        if step.events & {"ready", "success"} or (deadline is not None and time.monotonic() >= deadline):
            dev.reset()  # what the operator pressed while waiting (pause, the gripper) does not carry over
            return True
        if deadline is not None and (left := int(np.ceil(deadline - time.monotonic()))) != said:
            said = left
            hook("countdown", {"seconds": left})
        if hardware:  # a robot must be commanded to hold while the operator gets ready (not an episode step)
            obs, _, _ = held_step(env, hold_action(env))
            ep.observations[-1] = copy_obs(obs)
