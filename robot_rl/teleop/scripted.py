"""A scripted "human" for sim: an expert that takes over when the policy drifts away from what it would do.

It makes interventions testable and benchmarkable without a person. Each step it compares the policy's proposed
action (shown to it by the intervention wrapper through :meth:`ScriptedHuman.observe`) with the task's scripted
expert (``env.unwrapped.expert_action``); when a running average of their disagreement passes a threshold it
steers with the expert for ``takeover_steps`` steps, then hands back. A policy that has learned the task rarely
disagrees, so the intervention rate falls over training — the behaviour HIL-SERL relies on from its operators.

It can also work the episode controls a person works (``label``, ``ready_after``, ``stop_after_episodes``): press
ready when an episode waits for the operator (``teleop.start: ready``), label an episode a success once the task
reports one, or a failure after ``give_up_steps``, press stop — through the same events a keyboard or gamepad
raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.teleop.base import TeleopReading


@dataclass(frozen=True)
class ScriptedHumanConfig:
    """When and how long the scripted human takes over."""

    threshold: float = 0.45
    """Take over when the running mean of ``mean(|policy action - expert action|)`` exceeds this (actions in
    [-1, 1]; a wrong gripper command alone contributes 2/A)."""
    smoothing: float = 0.6
    """Weight of the past in the running mean of the disagreement (0 = react to a single step)."""
    takeover_steps: int = 8
    """Steps the expert steers once it takes over."""
    max_takeovers: int = 4
    """Takeovers per episode at most (a person's patience); 0 = unlimited."""
    noise: float = 0.1
    """Std of Gaussian noise on the expert's action while it steers (human imprecision)."""
    seed: int = 0
    """Seed of the noise."""
    ready_after: int = 2
    """An episode that waits for the operator's ready (``teleop.start: ready``): the ready press comes after this
    many control periods."""
    label: bool = False
    """Label episodes as an operator does: success (the success event) the step after the task reports success,
    failure after ``give_up_steps``. Useful where the env does not end episodes on success itself (a learned
    reward, ``terminate_on_success: false``)."""
    give_up_steps: int = 0
    """With ``label``: label an episode a failure after this many steps without success (0: never)."""
    stop_after_episodes: int = 0
    """Press stop at the start of the episode after this many (0: never): the run ends as a person's stop key
    ends it."""

    def validate(self) -> None:
        if self.threshold <= 0 or not 0.0 <= self.smoothing < 1.0:
            raise ValueError("scripted human: threshold must be > 0 and smoothing in [0, 1)")
        if self.takeover_steps < 1 or self.max_takeovers < 0 or self.noise < 0:
            raise ValueError("scripted human: takeover_steps >= 1, max_takeovers >= 0 and noise >= 0 needed")
        if self.ready_after < 0 or self.give_up_steps < 0 or self.stop_after_episodes < 0:
            raise ValueError("scripted human: ready_after, give_up_steps and stop_after_episodes must be >= 0")


class ScriptedHuman:
    """Teleop device backed by the task's expert; :meth:`attach` it to the env (the wrapper does)."""

    def __init__(self, cfg: ScriptedHumanConfig | None = None, action_dim: int | None = None) -> None:
        self.cfg = cfg or ScriptedHumanConfig()
        self.cfg.validate()
        self.action_dim = action_dim
        self.rng = np.random.default_rng(self.cfg.seed)
        self.task: Any = None
        self.disagreement = 0.0
        self.remaining = 0
        self.takeovers = 0
        self._expert: np.ndarray | None = None
        self._waited = 0  # reads before the episode's first step (waiting for the ready press)
        self._steps = 0
        self._label = ""  # the label to press at the next read
        self._episodes = 0  # episodes begun (resets)

    def attach(self, env: Any) -> None:
        """Binds the task whose expert it uses (``env.unwrapped.expert_action``)."""
        task = env.unwrapped
        if not callable(getattr(task, "expert_action", None)):
            raise ValueError(f"scripted human: {type(task).__name__} has no expert_action(); use a sim task "
                             "with a scripted expert (robot_rl/Reach|PickCube|PegInsert|Drive-v0)")
        self.task = task
        self.action_dim = int(np.prod(env.action_space.shape))

    def reset(self) -> None:
        """A new episode: patience restored, nothing pending."""
        self.disagreement, self.remaining, self.takeovers = 0.0, 0, 0
        self._expert, self._waited, self._steps, self._label = None, 0, 0, ""
        self._episodes += 1

    def after_step(self, info: dict[str, Any]) -> None:
        """Sees the step's outcome (``info["is_success"]``) and decides on a label (``label``)."""
        self._steps += 1
        c = self.cfg
        if not c.label or self._label:
            return
        if info.get("is_success"):
            self._label = "success"
        elif c.give_up_steps and self._steps >= c.give_up_steps:
            self._label = "failure"

    def observe(self, policy_action: np.ndarray) -> None:
        """Sees what the policy proposes for this step and decides whether to take over."""
        if self.task is None:
            raise RuntimeError("scripted human: attach(env) first")
        expert = np.asarray(self.task.expert_action(0.0), np.float32)
        self._expert = expert
        if self.remaining > 0:
            return
        err = float(np.mean(np.abs(np.asarray(policy_action, np.float32) - expert)))
        c = self.cfg
        self.disagreement = c.smoothing * self.disagreement + (1.0 - c.smoothing) * err
        patient = c.max_takeovers and self.takeovers >= c.max_takeovers
        if self.disagreement > c.threshold and not patient:
            self.remaining, self.disagreement = c.takeover_steps, 0.0
            self.takeovers += 1

    def read(self) -> TeleopReading:
        events = frozenset({self._label}) if self._label else frozenset()
        self._label = ""
        if self.cfg.stop_after_episodes and self._episodes > self.cfg.stop_after_episodes:
            events |= {"stop"}
        if self._expert is None:  # before the episode's first step: the operator gets ready
            self._waited += 1
            if self._waited > self.cfg.ready_after:
                events |= {"ready"}
            return TeleopReading(np.zeros(self.action_dim or 0, np.float32), events=events)
        if self.remaining <= 0:
            return TeleopReading(np.zeros(self.action_dim or 0, np.float32), active=False, events=events)
        self.remaining -= 1
        action = self._expert + self.rng.normal(0.0, self.cfg.noise, self._expert.shape).astype(np.float32)
        return TeleopReading(np.clip(action, -1.0, 1.0).astype(np.float32), active=True, events=events)

    def close(self) -> None:
        self.task = None
