"""Chunks of synthetic pixel transitions built with the real BlockBuilder, for the transport benchmarks."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from robot_rl.replay.rows import BlockBuilder
from robot_rl.spaces import ObsSpec


def pixel_chunks(spec: ObsSpec, action_dim: int, rows: int, transitions: int) -> Iterator[tuple[int, dict]]:
    """``(seq, chunk)`` for ``transitions`` transitions of one env, ``rows`` per chunk (the last may be shorter);
    frames cycle through 8 random images per camera, an episode ends every 100 steps."""
    frames = np.random.default_rng(0).integers(0, 255, (8, *next(iter(spec.cameras.values()))), np.uint8)
    builder = BlockBuilder(spec, action_dim, rows)

    def obs(k: int) -> dict:
        return {"state": np.full(spec.state_dim, k, np.float32),
                "pixels": {name: frames[(k + 3 * i) % 8] for i, name in enumerate(spec.cameras)}}

    seq = 0
    for t in range(transitions):
        builder.add(0, obs(t), np.zeros(action_dim, np.float32), 0.0, False, (t + 1) % 100 == 0, obs(t + 1))
        if builder.full or t + 1 == transitions:
            yield seq, builder.take()
            seq += 1
