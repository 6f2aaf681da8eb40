"""The learner process by role: the loop (``loop``), the intake of the actors' chunks (``intake``) with its counters
(``counters``) and episode statistics (``episode_stats``), the rate
limiter (``rate``), the weight board (``publisher``), the replay at start-up (``replay_setup``), the periodic work
(``schedule``) and what it reports (``report``)."""

from robot_rl.runtime.learner.counters import LearnerCounters
from robot_rl.runtime.learner.intake import Intake
from robot_rl.runtime.learner.loop import Learner
from robot_rl.runtime.learner.publisher import Publisher

__all__ = ["Intake", "Learner", "LearnerCounters", "Publisher"]
