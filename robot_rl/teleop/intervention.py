"""Intervention wrapper: while a human (or the scripted human) is active, their action replaces the policy's.

Each step the wrapper polls the device once (``read()`` never blocks) and reports in ``info``:

* ``intervened`` (bool) and ``executed_action`` (what the env really ran): the actor stores the executed action
  and files the transition as ``source="intervention"`` (replay: intervention partition *and* online);
* ``paused`` (bool): the robot holds still and the actor records nothing (pause key pressed, until it is pressed
  again; the device is disconnected; the robot's e-stop is latched (its env's ``halted()``); or the episode waits
  for the operator's ready, ``teleop.start``). A robot is commanded to hold; a sim is not stepped, so its step
  limit does not run meanwhile;
* ``operator`` (:class:`~robot_rl.envs.contract.OperatorState`): who is in control (policy, person, held,
  waiting), the device's action, the operator's label and the time left of ``teleop.episode_seconds``;
* ``teleop_connected`` (bool): a device that disconnected is logged once (a warning) and the robot holds still
  (the hold action) until it is back — a policy never runs unsupervised because a cable came out;
* at an episode's end ``episode_interventions`` (takeovers), ``episode_intervention_steps`` and
  ``episode_intervention_rate``.

Device events: ``success`` ends the episode as a success (terminated, reward = ``success_reward``,
``is_success``), ``failure`` ends it as a failure (terminated, reward unchanged), ``reset`` truncates it,
``pause`` toggles the pause; while an episode waits (``teleop.start``), ``ready`` (or ``success``) starts it.
``stop`` holds the robot for good and reports ``operator.stop``: the actor ends the training run (the learner takes
in what was sent and writes a final checkpoint; ``--resume`` continues it).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.envs import contract
from robot_rl.envs.held import held_step
from robot_rl.envs.make import Stage
from robot_rl.teleop.base import TeleopDevice, TeleopReading
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.factory import make_device, reads_terminal
from robot_rl.teleop.scripted import ScriptedHuman
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


class InterventionWrapper(gym.Wrapper):
    """Muxes policy and human actions; ``device`` implements :class:`robot_rl.teleop.base.TeleopDevice`.

    ``start``: how each episode starts (``TeleopConfig.start_mode()``: ready, countdown or now); ``countdown_s``
    the countdown's length; ``episode_seconds`` the operator's time limit (0: none); ``clock`` the time source
    (seconds)."""

    def __init__(self, env: gym.Env, device: TeleopDevice, success_reward: float = 1.0, *, start: str = "now",
                 countdown_s: float = 3.0, episode_seconds: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(env)
        self.device = device
        self.success_reward = float(success_reward)
        self.action_shape = env.action_space.shape
        if start not in ("ready", "countdown", "now"):
            raise ValueError(f"start must be ready, countdown or now, got {start!r}")
        self.start, self.countdown_s, self.episode_seconds, self.clock = start, countdown_s, episode_seconds, clock
        # a robot must be commanded to hold while held or waiting; a sim simply stands still (its clock stops)
        self.hardware = contract.drives_hardware(env)
        if hasattr(device, "attach"):  # the scripted human needs the task's expert
            device.attach(env)
        self.paused = False
        self.waiting = False
        self._connected = True
        self.stopped = False  # the operator pressed stop: held from then on
        self._obs: Any = None
        self._reset_stats()

    def _reset_stats(self) -> None:
        self.steps = self.intervention_steps = self.interventions = 0
        self._was_active = False
        self.running_s = 0.0  # the episode's running time (held and waiting periods excluded)
        self._last_t: float | None = None

    def _hold(self) -> np.ndarray:
        hold = getattr(self.env.unwrapped, "hold_action", None)
        return np.asarray(hold(), np.float32) if callable(hold) else np.zeros(self.action_shape, np.float32)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        if hasattr(self.device, "reset"):
            self.device.reset()
        self._reset_stats()
        self._obs = obs
        self.waiting = self.start != "now"
        self._wait_began = self.clock()
        return obs, info

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        if self.stopped:
            return self._held(self.device.read(), "held")
        halted = getattr(self.env.unwrapped, "halted", None)
        if self.hardware and callable(halted) and halted():  # a latched e-stop: held, the episode's time kept
            self._last_t = None
            return self._held(self.device.read(), "held")
        if self.waiting:
            return self._wait()
        if hasattr(self.device, "observe"):  # the scripted human judges the policy's proposal
            self.device.observe(action)
        reading = self.device.read()
        events = set(reading.events)
        if "pause" in events:
            self.paused = not self.paused
        self._report_connection(reading.connected)
        if self._stop_pressed(events):
            return self._held(reading, "held")
        ends = bool(events & {"success", "failure", "reset"})
        if not reading.connected or (self.paused and not ends):
            self._last_t = None
            return self._held(reading, "held")
        intervened = False
        if self.paused:  # a label or reset while paused ends the episode here, the robot still held
            self.paused = False
            executed = self._hold()
        elif reading.active:
            executed = np.asarray(reading.action, np.float32)
            if executed.shape != self.action_shape or not np.all(np.isfinite(executed)):
                raise ValueError(f"teleop device gave action {executed!r}; expected finite {self.action_shape}")
            executed, intervened = np.clip(executed, -1.0, 1.0), True
        else:
            executed = np.asarray(action, np.float32)
        obs, reward, terminated, truncated, info = self.env.step(executed)
        self._obs = obs
        info = dict(info)
        if hasattr(self.device, "after_step"):  # the scripted human labels what it sees
            self.device.after_step(info)
        now = self.clock()
        self.running_s += 0.0 if self._last_t is None else now - self._last_t
        self._last_t = now
        label = ""
        if "success" in events:
            terminated, reward, label = True, self.success_reward, "success"
            info[contract.SUCCESS] = True
        elif "failure" in events:
            terminated, label = True, "failure"
            info[contract.SUCCESS] = False
        if "reset" in events:
            truncated = True
        left = None
        if self.episode_seconds:
            left = max(0.0, self.episode_seconds - self.running_s)
            truncated = truncated or left <= 0.0  # the operator's time limit
        self.steps += 1
        if intervened:
            self.intervention_steps += 1
            self.interventions += int(not self._was_active)
        self._was_active = intervened
        info.update({contract.INTERVENED: intervened, contract.EXECUTED_ACTION: executed,
                     contract.TELEOP_CONNECTED: reading.connected,
                     contract.PAUSED: bool(info.get(contract.PAUSED, False)),  # the robot's own hold (e-stop)
                     contract.OPERATOR: contract.OperatorState("person" if intervened else "policy",
                                                               self._device_action(reading), label, left)})
        if terminated or truncated:
            info.update(episode_interventions=self.interventions,
                        episode_intervention_steps=self.intervention_steps,
                        episode_intervention_rate=self.intervention_steps / max(self.steps, 1))
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _wait(self) -> tuple[Any, float, bool, bool, dict]:
        """A period of the wait for the operator's ready (or the countdown's end): the robot held, nothing
        recorded. The episode runs from the next period on."""
        reading = self.device.read()
        self._report_connection(reading.connected)
        if self._stop_pressed(set(reading.events)):
            return self._held(reading, "held")
        countdown_over = self.start == "countdown" and self.clock() - self._wait_began >= self.countdown_s
        if reading.connected and (reading.events & {"ready", "success"} or countdown_over):
            self.waiting = False
            self.paused = False
            if hasattr(self.device, "reset"):  # what was pressed while waiting (the gripper) does not carry over
                self.device.reset()
            log.info("episode started")
        return self._held(reading, "waiting")

    def _held(self, reading: TeleopReading, control: str) -> tuple[Any, float, bool, bool, dict]:
        """The robot held still this period (paused, device gone, waiting): a robot is commanded to hold, a sim is
        not stepped. The actor records nothing (``paused``)."""
        executed = self._hold()
        if self.hardware:  # neither a step of the episode nor its end (envs/held.py)
            obs, reward, info = held_step(self.env, executed)
        else:
            obs, reward, info = self._obs, 0.0, {}
        self._obs = obs
        info.update({contract.INTERVENED: False, contract.EXECUTED_ACTION: executed,
                     contract.TELEOP_CONNECTED: reading.connected, contract.PAUSED: True,
                     contract.OPERATOR: contract.OperatorState(control, self._device_action(reading),
                                                               stop=self.stopped)})
        return obs, float(reward), False, False, info

    def _device_action(self, reading: TeleopReading) -> np.ndarray:
        action = np.asarray(reading.action, np.float32)
        return action if action.shape == self.action_shape else np.zeros(self.action_shape, np.float32)

    def _stop_pressed(self, events: set[str]) -> bool:
        """Whether stop was pressed now (the first time): from then on the robot holds."""
        if "stop" not in events or self.stopped:
            return False
        self.stopped = True
        log.warning("stop pressed: the robot holds; the run ends with a final checkpoint")
        return True

    def _report_connection(self, connected: bool) -> None:
        if connected != self._connected:
            name = type(self.device).__name__
            if connected:
                log.info("%s is back", name)
            else:
                log.warning("%s disconnected: holding the robot still until it is back", name)
        self._connected = connected

    def close(self) -> None:
        self.device.close()
        super().close()


def wrap_with_teleop(env: gym.Env, cfg: TeleopConfig, seed: int = 0) -> gym.Env:
    """``env`` behind an :class:`InterventionWrapper` for ``cfg.device`` (unchanged for ``device: none``)."""
    cfg.validate()
    if cfg.device == "none":
        return env
    if cfg.device == "scripted":
        device: Any = ScriptedHuman(dataclasses.replace(cfg.scripted, seed=cfg.scripted.seed + seed))
    else:
        device = make_device(cfg, int(np.prod(env.action_space.shape)))
        if reads_terminal(device):  # Enter is the device's success event now: the env must not read it too
            getattr(env.unwrapped, "leave_terminal_to_teleop", lambda: None)()
    return InterventionWrapper(env, device, cfg.success_reward, start=cfg.start_mode(), countdown_s=cfg.countdown_s,
                               episode_seconds=cfg.episode_seconds)


def teleop_stage(cfg: TeleopConfig, seed: int = 0) -> Stage:
    """The env pipeline's teleop stage: the env behind the intervention wrapper for ``cfg.device`` (``seed``: the
    scripted human's offset for this env)."""
    return Stage("teleop", lambda env: wrap_with_teleop(env, cfg, seed=seed))
