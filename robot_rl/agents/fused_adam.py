"""A fused Adam step without ``torch.optim``'s per-step Python bookkeeping (a large share of a small CPU update)."""

from __future__ import annotations

from typing import Any

import torch

from robot_rl.agents.torch_compat import fused_adam_, fused_adam_available


class FusedAdamStep:
    """``optimizer.step()`` of a fused ``torch.optim.Adam`` without its per-step Python bookkeeping.

    Same kernel (``torch._fused_adam_``), same state tensors (``optimizer.state``/``state_dict`` unchanged);
    the per-group tensor lists are cached and rebuilt when the state is replaced (``load_state_dict``) or a
    group's hyper-parameters change. Groups with equal hyper-parameters share one kernel call. Falls back to
    ``optimizer.step()`` over just these groups for anything unusual (uninitialised state, amsgrad, weight decay,
    non-fused).

    Where this torch's fused kernel is missing or changed (:func:`~robot_rl.agents.torch_compat.fused_adam_available`)
    every step is ``torch.optim.Adam``'s own non-fused one: a step pre-hook on ``optimizer`` turns its groups'
    ``fused`` flag off before each ``optimizer.step()`` (also one called directly, and after a ``load_state_dict``
    of a checkpoint saved with ``fused=True``), so the optimizer stays usable on its own too.
    """

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self._plans: dict[tuple[int, ...], list] = {}
        optimizer.register_step_pre_hook(_unfuse_if_unavailable)

    def step(self, groups: tuple[int, ...]) -> None:
        """Steps the parameter groups with these indices (all of whose parameters must have a gradient)."""
        if not fused_adam_available():
            self._optimizer_step(groups)
            return
        plan = self._plans.get(groups)
        if plan is None or not self._valid(plan):
            plan = self._build(groups)
            if plan is None:
                self._optimizer_step(groups)
                return
            self._plans[groups] = plan
        for hyper, params, grads, exp_avgs, exp_avg_sqs, steps, _ in plan:
            lr, beta1, beta2, eps = hyper
            fused_adam_(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps)

    def _optimizer_step(self, groups: tuple[int, ...]) -> None:
        """``optimizer.step()`` over only the groups with these indices (the others are left alone)."""
        opt = self.optimizer
        all_groups = opt.param_groups
        opt.param_groups = [all_groups[gi] for gi in groups]
        try:
            opt.step()
        finally:
            opt.param_groups = all_groups

    def _valid(self, plan: list) -> bool:
        opt = self.optimizer
        for hyper, params, grads, exp_avgs, _, _, group_ids in plan:
            for gi in group_ids:
                if _hyper(opt.param_groups[gi]) != hyper:
                    return False
            if opt.state.get(params[0], {}).get("exp_avg") is not exp_avgs[0] or params[0].grad is not grads[0]:
                return False
        return True

    def _build(self, groups: tuple[int, ...]) -> list | None:
        opt = self.optimizer
        if not isinstance(opt, torch.optim.Adam):
            return None
        by_hyper: dict[tuple, list[int]] = {}
        for gi in groups:
            group = opt.param_groups[gi]
            if (not group.get("fused") or group["amsgrad"] or group["weight_decay"] or group["maximize"]
                    or group.get("decoupled_weight_decay") or group["capturable"] or group["differentiable"]):
                return None
            by_hyper.setdefault(_hyper(group), []).append(gi)
        plan = []
        for hyper, gis in by_hyper.items():
            params = [p for gi in gis for p in opt.param_groups[gi]["params"]]
            states = [opt.state.get(p) for p in params]
            if any(not s or p.grad is None for p, s in zip(params, states)):
                return None  # the first step initialises the state
            plan.append((hyper, params, [p.grad for p in params], [s["exp_avg"] for s in states],
                         [s["exp_avg_sq"] for s in states], [s["step"] for s in states], tuple(gis)))
        return plan


def _unfuse_if_unavailable(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    """Step pre-hook: without a working fused kernel, the optimizer's groups take the non-fused implementation."""
    if fused_adam_available():
        return
    for group in optimizer.param_groups:
        if group.get("fused"):
            group["fused"] = False
    optimizer.defaults["fused"] = False


def _hyper(group: dict) -> tuple:
    lr = group["lr"]
    return (float(lr) if isinstance(lr, torch.Tensor) else lr, *group["betas"], group["eps"])
