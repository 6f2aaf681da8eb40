"""The instructions a task gives, with their embeddings: what turns an embedding in a replay back into its text
(dataset export of a run) and what an exported policy's runner looks the text up in."""

from __future__ import annotations

from typing import Any

import numpy as np

from robot_rl.envs.config import EnvConfig
from robot_rl.envs.contract import drives_hardware
from robot_rl.text import make_text_encoder

PROBE_RESETS = 32
"""Resets of a sim whose instruction changes per episode (the seeds 0..31), to collect its instructions."""


def instruction_table(env_cfg: EnvConfig, env: Any) -> dict[str, np.ndarray]:
    """Instruction text -> its embedding (``env.instruction_encoder``), for every instruction the env gives: the
    config's fixed ``env.instruction``, or those a sim's resets draw (a robot is never reset here)."""
    texts = {env_cfg.instruction} if env_cfg.instruction else set()
    if not texts and not drives_hardware(env):
        for seed in range(PROBE_RESETS):
            text = env.reset(seed=seed)[1].get("instruction")
            if text:
                texts.add(str(text))
    encoder = make_text_encoder(env_cfg.instruction_encoder)
    return {t: np.asarray(encoder.encode(t), np.float32) for t in sorted(texts)}
