"""The env -> actor contract: what a step tells the actor beyond observation, reward and done.

A single env speaks gymnasium, so the extra facts travel in ``info`` under the keys below; the env pipeline's
adapter maps a foreign env's own keys onto them (``env.success_key``, ``env.intervention_key``, ...), and
:class:`~robot_rl.teleop.intervention.InterventionWrapper` writes the teleop ones. The actor never reads ``info``
itself: the batched env turns every step into a typed :class:`BatchStep`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

SUCCESS = "is_success"
"""bool: the task succeeded (read at the end of an episode; the last step's value counts)."""
INTERVENED = "intervened"
"""bool: a human (or the scripted human) chose this step's action."""
EXECUTED_ACTION = "executed_action"
"""float32 [A] in [-1, 1]: the action the env really ran (the human's when intervened, the hold action when
paused); absent = the action the actor gave."""
PAUSED = "paused"
"""bool: the robot held still (pause key, teleop device gone); the actor records nothing for this step."""
TELEOP_CONNECTED = "teleop_connected"
"""bool: the teleop device answers (informational)."""
OPERATOR = "operator"
"""OperatorState: the person at the teleop device this step (written by the intervention wrapper; absent without
a device)."""
INSTRUCTION = "instruction"
"""str: the episode's language instruction as text (in every ``reset`` and ``step`` info of an env whose
observation carries one; the observation holds its embedding)."""


class RobotUnavailable(TimeoutError):
    """The robot stopped answering mid-run (its state stream stalled, its driver went away): a new actor life
    reconnects (the supervisor starts one); reported in one line, not as a crash."""


LABELS = ("", "success", "failure")
"""An episode's label by the operator: none (the env's own end, a reset, a time limit), success, failure."""


@dataclass(frozen=True)
class OperatorState:
    """The person at the teleop device in one step: who is in control, what the device says, and the episode's
    label when they gave one (what the operator view shows and the episode statistics count)."""

    control: str
    """policy | person (the device's action ran) | held (paused, device gone) | waiting (for the ready key)."""
    action: np.ndarray
    """float32 [A]: the device's action this step (zeros when untouched)."""
    label: str = ""
    """success | failure when the operator labelled the episode at this step (it ends here); '' otherwise."""
    seconds_left: float | None = None
    """Of the operator's time limit per episode (None: no limit)."""
    stop: bool = False
    """The operator pressed stop (key, button): the robot holds from here on and the run ends with a final
    checkpoint."""


@dataclass(frozen=True)
class StepReport:
    """One env's step, as the actor needs it."""

    success: bool
    intervened: bool
    paused: bool
    executed_action: np.ndarray
    operator: OperatorState | None = None

    @classmethod
    def from_info(cls, info: Mapping[str, Any], action: np.ndarray) -> StepReport:
        executed = info.get(EXECUTED_ACTION)
        return cls(success=bool(info.get(SUCCESS, False)), intervened=bool(info.get(INTERVENED, False)),
                   paused=bool(info.get(PAUSED, False)),
                   executed_action=np.asarray(action if executed is None else executed, np.float32),
                   operator=info.get(OPERATOR))


@dataclass(frozen=True)
class BatchStep:
    """One step of N envs (auto-reset): arrays ``[N, ...]``; observation trees as the env's space.

    ``obs`` of an env that finished is its new episode's first observation; ``final_obs`` holds the finished
    episode's last one (rows valid where ``done``), ``final_info`` its last ``info`` (None elsewhere)."""

    obs: Any
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: Any
    final_info: list[dict | None]
    success: np.ndarray
    intervened: np.ndarray
    paused: np.ndarray
    executed_action: np.ndarray
    instruction: tuple[str, ...] = ()
    """Each env's instruction text for ``obs`` (a new episode's where one started; '' = none)."""
    operator: tuple[OperatorState | None, ...] = ()
    """Each env's :class:`OperatorState` of this step (None without a teleop device; empty: none anywhere)."""

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    def info(self) -> dict[str, Any]:
        """The same facts as the Isaac-Gym-style ``info`` dict of :meth:`BatchedEnv.step`."""
        return {"done": self.done, SUCCESS: self.success, "final_obs": self.final_obs, "final_info": self.final_info,
                INTERVENED: self.intervened, PAUSED: self.paused, EXECUTED_ACTION: self.executed_action}


def drives_hardware(env: Any) -> bool:
    """Whether ``env`` (any wrapper of it, or a batched env of them) moves a real or rehearsed robot (its unwrapped
    env says ``drives_hardware = True``): nobody else may step it, and random actions are asked for explicitly."""
    first = env.envs[0] if hasattr(env, "envs") else env
    return bool(getattr(first.unwrapped, "drives_hardware", False))
