"""Every seed of a run, derived in one place from ``TrainConfig.seed``.

Each consumer gets its own stream (numpy ``SeedSequence`` over the run seed, a purpose and the consumer's ids), so
two actors, two incarnations of an actor, or two runs with different ``--seed`` never share exploration noise,
env resets or teleop randomness, and the same seed reproduces the same streams.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_PURPOSES = {"agent": 1, "replay": 2, "actor_policy": 3, "actor_env": 4, "actor_warmup": 5, "teleop": 6, "eval": 7}


@dataclass(frozen=True)
class Seeds:
    """``Seeds(cfg.seed).actor_policy(index, incarnation)`` and so on; all values fit in 63 bits."""

    root: int

    def _derive(self, purpose: str, *ids: int) -> int:
        words = [self.root & 0xFFFF_FFFF, self.root >> 32 & 0xFFFF_FFFF, _PURPOSES[purpose], *ids]
        return int(np.random.SeedSequence(words).generate_state(2, np.uint32).view(np.uint64)[0] >> np.uint64(1))

    def agent(self) -> int:
        """The learner's agent: parameter initialisation and the update's randomness."""
        return self._derive("agent")

    def replay(self) -> int:
        """The learner's replay sampler."""
        return self._derive("replay")

    def actor_policy(self, index: int, incarnation: int, slot: int = 0) -> int:
        """Exploration noise of actor ``index`` (its ``slot``-th policy copy)."""
        return self._derive("actor_policy", index, incarnation, slot)

    def actor_env(self, index: int, incarnation: int) -> int:
        """First reset of actor ``index``'s envs (env i of a batch resets with this + i)."""
        return self._derive("actor_env", index, incarnation) % (1 << 31)

    def actor_warmup(self, index: int, incarnation: int) -> int:
        """Random warm-up actions of actor ``index``."""
        return self._derive("actor_warmup", index, incarnation)

    def teleop(self, index: int, env: int) -> int:
        """The scripted human of env ``env`` of actor ``index``."""
        return self._derive("teleop", index, env) % (1 << 31)

    def evaluation(self) -> int:
        """Evaluation episodes (episode i resets with this + i): the same placements at every evaluation."""
        return 10_000 + self.root
