"""Behaviour-cloning term of the actor loss (SACConfig.bc_weight): imitate demo and intervention rows, optionally
only where the critics prefer the stored action to the policy's own (the Q-filter of Nair et al. 2018)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from robot_rl.replay.rows import SOURCE_CODE


def bc_term(mean_action: torch.Tensor, mb: Mapping[str, Any], q_data: torch.Tensor, q_pi: torch.Tensor,
            q_filter: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, count, mask)``: loss = mean over the masked rows of ``||mean_action - a||^2``.

    ``mean_action [B, A]``: the policy's deterministic action; ``q_data [B]`` / ``q_pi [B]``: the critics' mean
    value of the stored and of the policy's action. The mask (float ``[B]``) keeps demo or intervention rows,
    and with ``q_filter`` only those where ``q_data > q_pi``."""
    mask = (mb["source"].reshape(-1) == SOURCE_CODE["demo"]) | mb["intervened"].reshape(-1).bool()
    if q_filter:
        mask = mask & (q_data > q_pi)
    mask = mask.float()
    count = mask.sum()
    err = (mean_action - mb["action"].reshape(mean_action.shape).float()).square().sum(-1)
    return (err * mask).sum() / count.clamp_min(1.0), count, mask
