"""Network building blocks: a critic ensemble evaluated as one batched module, the tanh-Gaussian actor, and the
deterministic ``obs -> action`` module agents hand to export (:class:`EncodedPolicy`, used by robot_rl.deploy).

The ensemble keeps every member's weights stacked in one tensor ``[E, in, out]`` so a forward pass over all
critics is a single batched matmul (``torch.baddbmm``), never a Python loop over critics.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers applied as one batched matmul: ``[E, B, in] -> [E, B, out]``."""

    def __init__(self, ensemble_size: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(ensemble_size, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(ensemble_size, 1, out_features))
        # Same init as nn.Linear, drawn independently per member so the members disagree from the start.
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, detach_params: bool = False,
                members: torch.Tensor | None = None) -> torch.Tensor:
        w, b = (self.weight.detach(), self.bias.detach()) if detach_params else (self.weight, self.bias)
        if members is not None:  # evaluate only a subset of the ensemble (e.g. the target's random subset)
            w, b = w[members], b[members]
        if x.dim() == 2:  # the same input for every member
            x = x.unsqueeze(0).expand(w.shape[0], -1, -1)
        return torch.baddbmm(b, x, w)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over features with a separate affine transform per ensemble member."""

    def __init__(self, ensemble_size: int, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ensemble_size, 1, features))
        self.bias = nn.Parameter(torch.zeros(ensemble_size, 1, features))
        self.eps = eps

    def forward(self, x: torch.Tensor, detach_params: bool = False,
                members: torch.Tensor | None = None) -> torch.Tensor:
        w, b = (self.weight.detach(), self.bias.detach()) if detach_params else (self.weight, self.bias)
        if members is not None:
            w, b = w[members], b[members]
        return torch.addcmul(b, F.layer_norm(x, x.shape[-1:], eps=self.eps), w)


class EnsembleCritic(nn.Module):
    """``E`` Q-networks ``Q(z, a)`` as one module: Linear -> [LayerNorm] -> ReLU blocks, then a linear head.

    ``out_dim`` is 1 for a scalar critic and the number of bins for an HL-Gauss categorical critic.
    """

    def __init__(
        self,
        ensemble_size: int,
        in_dim: int,
        hidden_dims: tuple[int, ...],
        out_dim: int = 1,
        layer_norm: bool = True,
    ) -> None:
        super().__init__()
        self.ensemble_size = ensemble_size
        self.linears = nn.ModuleList()
        self.norms = nn.ModuleList()
        last = in_dim
        for h in hidden_dims:
            self.linears.append(EnsembleLinear(ensemble_size, last, h))
            self.norms.append(EnsembleLayerNorm(ensemble_size, h) if layer_norm else nn.Identity())
            last = h
        self.head = EnsembleLinear(ensemble_size, last, out_dim)

    def forward(self, z: torch.Tensor, action: torch.Tensor, detach_params: bool = False,
                members: torch.Tensor | None = None) -> torch.Tensor:
        """Returns ``[E, B, out_dim]`` (``E = len(members)`` when given). ``detach_params`` lets gradients reach
        the inputs but not the weights (the actor loss differentiates through the critic without training it)."""
        x = torch.cat([z, action], dim=-1)
        for linear, norm in zip(self.linears, self.norms):
            x = linear(x, detach_params, members)
            if isinstance(norm, EnsembleLayerNorm):
                x = norm(x, detach_params, members)
            x = F.relu_(x)  # in place: no backward needs the pre-activation
        return self.head(x, detach_params, members)


def mlp(in_dim: int, hidden_dims: tuple[int, ...], out_dim: int, layer_norm: bool = False) -> nn.Sequential:
    """Plain MLP: Linear -> [LayerNorm] -> ReLU blocks, then a linear output layer."""
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden_dims:
        layers.append(nn.Linear(last, h))
        if layer_norm:
            layers.append(nn.LayerNorm(h))
        layers.append(nn.ReLU())
        last = h
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class TanhGaussianActor(nn.Module):
    """Squashed Gaussian policy: ``a = tanh(mu + sigma * eps)`` with the exact tanh log-det correction."""

    def __init__(
        self,
        in_dim: int,
        action_dim: int,
        hidden_dims: tuple[int, ...],
        log_std_min: float = -10.0,
        log_std_max: float = 2.0,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        self.net = mlp(in_dim, hidden_dims, 2 * action_dim, layer_norm)
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max

    def forward(self, z: torch.Tensor, deterministic: bool = False,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns ``(action in [-1, 1], log_prob [B])``; log_prob is zeros when deterministic. The Gaussian
        noise comes from ``generator`` (the agent's own; the global RNG only when None)."""
        mu, log_std = self.net(z).chunk(2, dim=-1)
        if deterministic:
            return torch.tanh(mu), torch.zeros(mu.shape[:-1], device=mu.device, dtype=mu.dtype)
        return squashed_gaussian(mu, log_std, self.log_std_min, self.log_std_max, generator)


def squashed_gaussian(mu: torch.Tensor, raw_log_std: torch.Tensor, log_std_min: float, log_std_max: float,
                      generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A sample ``tanh(mu + sigma * eps)`` in [-1, 1] and its log-probability ``[B]`` (exact tanh log-det);
    ``raw_log_std`` is soft-clamped into ``[log_std_min, log_std_max]``."""
    # Soft clamp keeps gradients alive at the bounds (as in DrQ-v2 / jaxrl).
    log_std = log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw_log_std) + 1)
    eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    pre_tanh = mu + eps * log_std.exp()
    action = torch.tanh(pre_tanh)
    # log N(pre_tanh; mu, std) - sum log(1 - tanh^2), the latter in the stable softplus form.
    log_prob = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    log_prob = log_prob - (2 * (math.log(2) - pre_tanh - F.softplus(-2 * pre_tanh))).sum(-1)
    return action, log_prob


@torch.no_grad()
def init_parameters(module: nn.Module, generator: torch.Generator) -> None:
    """PyTorch's default initialisation of every Linear / Conv2d / EnsembleLinear in ``module``, drawn from
    ``generator``: an agent built from a seed is the same whatever the global torch RNG holds, and building it
    leaves that RNG alone. (Default init = kaiming-uniform with a = sqrt(5): U(+-1/sqrt(fan_in)), bias alike.)"""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            bound = 1.0 / math.sqrt(m.weight[0].numel())
            m.weight.uniform_(-bound, bound, generator=generator)
            if m.bias is not None:
                m.bias.uniform_(-bound, bound, generator=generator)
        elif isinstance(m, EnsembleLinear):
            bound = 1.0 / math.sqrt(m.weight.shape[1])
            m.weight.uniform_(-bound, bound, generator=generator)
            m.bias.uniform_(-bound, bound, generator=generator)


def phase_one_hot(chunk_index: torch.Tensor, phases: int) -> torch.Tensor:
    """``[B]`` indices of steps in their base-policy chunk -> ``[B, phases]`` one-hot (later indices share the last
    phase; -1, a step the robot held, is all zeros)."""
    index = chunk_index.reshape(-1).long()
    return F.one_hot(index.clamp(0, phases - 1), phases).float() * (index >= 0).unsqueeze(-1).float()


class EncodedPolicy(nn.Module):
    """``tanh(head(encoder(obs)))`` for heads that output the pre-squash mean first (SAC's Gaussian actor outputs
    ``[mean, log_std]``: only the mean is kept)."""

    def __init__(self, encoder: nn.Module, head: nn.Module, action_dim: int) -> None:
        super().__init__()
        self.encoder, self.head, self.action_dim = encoder, head, action_dim

    def forward(self, obs: dict[str, Any]) -> torch.Tensor:
        return torch.tanh(self.head(self.encoder(obs))[..., : self.action_dim])
