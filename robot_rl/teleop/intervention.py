"""Intervention wrapper: while a human (or the scripted human) is active, their action replaces the policy's.

Each step the wrapper polls the device once (``read()`` never blocks) and reports in ``info``:

* ``intervened`` (bool) and ``executed_action`` (what the env really ran): the actor stores the executed action
  and files the transition as ``source="intervention"`` (replay: intervention partition *and* online);
* ``paused`` (bool): the robot holds still and the actor records nothing (pause key pressed, until it is pressed
  again; or the device is disconnected);
* ``teleop_connected`` (bool): a device that disconnected is logged once (a warning) and the robot holds still
  (the hold action) until it is back — a policy never runs unsupervised because a cable came out;
* at an episode's end ``episode_interventions`` (takeovers), ``episode_intervention_steps`` and
  ``episode_intervention_rate``.

Device events: ``success`` ends the episode as a success (terminated, reward = ``success_reward``,
``is_success``), ``failure`` ends it as a failure (terminated, reward unchanged), ``reset`` truncates it,
``pause`` toggles the pause.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.envs import contract
from robot_rl.teleop.base import TeleopDevice
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.scripted import ScriptedHuman
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


class InterventionWrapper(gym.Wrapper):
    """Muxes policy and human actions; ``device`` implements :class:`robot_rl.teleop.base.TeleopDevice`."""

    def __init__(self, env: gym.Env, device: TeleopDevice, success_reward: float = 1.0) -> None:
        super().__init__(env)
        self.device = device
        self.success_reward = float(success_reward)
        self.action_shape = env.action_space.shape
        if hasattr(device, "attach"):  # the scripted human needs the task's expert
            device.attach(env)
        self.paused = False
        self._connected = True
        self._reset_stats()

    def _reset_stats(self) -> None:
        self.steps = self.intervention_steps = self.interventions = 0
        self._was_active = False

    def _hold(self) -> np.ndarray:
        hold = getattr(self.env.unwrapped, "hold_action", None)
        return np.asarray(hold(), np.float32) if callable(hold) else np.zeros(self.action_shape, np.float32)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        if hasattr(self.device, "reset"):
            self.device.reset()
        self._reset_stats()
        return obs, info

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        if hasattr(self.device, "observe"):  # the scripted human judges the policy's proposal
            self.device.observe(action)
        reading = self.device.read()
        events = set(reading.events)
        if "pause" in events:
            self.paused = not self.paused
        self._report_connection(reading.connected)
        intervened = False
        if not reading.connected or self.paused:
            executed = self._hold()
        elif reading.active:
            executed = np.asarray(reading.action, np.float32)
            if executed.shape != self.action_shape or not np.all(np.isfinite(executed)):
                raise ValueError(f"teleop device gave action {executed!r}; expected finite {self.action_shape}")
            executed, intervened = np.clip(executed, -1.0, 1.0), True
        else:
            executed = np.asarray(action, np.float32)
        obs, reward, terminated, truncated, info = self.env.step(executed)
        info = dict(info)
        if "success" in events:
            terminated, reward = True, self.success_reward
            info[contract.SUCCESS] = True
        elif "failure" in events:
            terminated = True
            info[contract.SUCCESS] = False
        if "reset" in events:
            truncated = True
        self.steps += 1
        if intervened:
            self.intervention_steps += 1
            self.interventions += int(not self._was_active)
        self._was_active = intervened
        info.update({contract.INTERVENED: intervened, contract.EXECUTED_ACTION: executed,
                     contract.TELEOP_CONNECTED: reading.connected,
                     contract.PAUSED: self.paused or not reading.connected})  # nothing to learn from a held robot
        if terminated or truncated:
            info.update(episode_interventions=self.interventions,
                        episode_intervention_steps=self.intervention_steps,
                        episode_intervention_rate=self.intervention_steps / max(self.steps, 1))
        return obs, float(reward), bool(terminated), bool(truncated), info

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
        from robot_rl.teleop.factory import make_device  # hardware libraries load only when a device is used

        device = make_device(cfg, int(np.prod(env.action_space.shape)))
    return InterventionWrapper(env, device, cfg.success_reward)
