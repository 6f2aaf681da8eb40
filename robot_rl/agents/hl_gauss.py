"""HL-Gauss categorical value representation (Farebrother et al. 2024, "Stop Regressing").

The critic predicts logits over fixed value bins; a scalar target y becomes the probability mass a Gaussian
N(y, sigma^2) puts on each bin, and the loss is the cross-entropy to that histogram.
"""

from __future__ import annotations

import torch
from torch import nn


class HLGauss(nn.Module):
    def __init__(self, v_min: float, v_max: float, num_bins: int, sigma_ratio: float = 0.75) -> None:
        super().__init__()
        edges = torch.linspace(v_min, v_max, num_bins + 1)
        self.register_buffer("edges", edges, persistent=False)
        self.register_buffer("centers", (edges[:-1] + edges[1:]) / 2, persistent=False)
        self.sigma = sigma_ratio * (v_max - v_min) / num_bins

    def target_probs(self, y: torch.Tensor) -> torch.Tensor:
        """``y [...]`` -> ``[..., bins]`` histogram of N(y, sigma^2) over the bins, renormalised to sum to 1."""
        y = y.clamp(self.edges[0], self.edges[-1])
        cdf = torch.special.erf((self.edges - y.unsqueeze(-1)) / (self.sigma * 2**0.5))
        mass = cdf[..., 1:] - cdf[..., :-1]
        return mass / (cdf[..., -1:] - cdf[..., :1]).clamp_min(1e-8)

    def to_scalar(self, logits: torch.Tensor) -> torch.Tensor:
        """``[..., bins]`` logits -> ``[...]`` expected value."""
        return (logits.float().softmax(-1) * self.centers).sum(-1)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy between predicted logits ``[E, B, bins]`` and targets ``y [B]``."""
        target = self.target_probs(y).unsqueeze(0)
        return -(target * logits.float().log_softmax(-1)).sum(-1).mean()
