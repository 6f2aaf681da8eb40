"""The actor process by role: the control loop (``loop``), what it does each period (``acting``), the policy swap
(``weights``), the outbox to the learner (``outbox``), the pace the learner sets (``pace``), episode numbering
(``episodes``) and the operator view (``view``)."""

from robot_rl.runtime.actor.acting import BaseSteps, row
from robot_rl.runtime.actor.loop import Actor, make_actor_env, sleep_until

__all__ = ["Actor", "BaseSteps", "make_actor_env", "row", "sleep_until"]
