"""Each env's episode number and step: ids unique across an actor's lives (a resumed run's too: one replay holds
them all), steps numbered without the held periods."""

from __future__ import annotations

import os

import numpy as np


class EpisodeNumbers:
    """Episode ids and step indices of an actor's ``n`` envs."""

    def __init__(self, index: int, n: int) -> None:
        # 22 random bits, the actor's index, then the episode count of this life
        self.base = (int.from_bytes(os.urandom(3), "little") & 0x3FFFFF) << 41 | (index & 0x1FF) << 32
        self.ids = np.arange(n, dtype=np.int64)
        self.step = np.zeros(n, np.int64)
        self._next = n
        self.ended = 0  # episodes ended in this life

    def episode_id(self, i: int) -> int:
        return self.base + int(self.ids[i])

    def stepped(self, i: int) -> None:
        self.step[i] += 1  # a held period is not a step of the episode (envs/held.py)

    def end(self, i: int) -> None:
        self.ids[i], self.step[i] = self._next, 0
        self._next += 1
        self.ended += 1
