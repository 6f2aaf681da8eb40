"""A fused Adam step without ``torch.optim``'s per-step Python bookkeeping (a large share of a small CPU update)."""

from __future__ import annotations

import torch


class FusedAdamStep:
    """``optimizer.step()`` of a fused ``torch.optim.Adam`` without its per-step Python bookkeeping.

    Same kernel (``torch._fused_adam_``), same state tensors (``optimizer.state``/``state_dict`` unchanged);
    the per-group tensor lists are cached and rebuilt when the state is replaced (``load_state_dict``) or a
    group's hyper-parameters change. Groups with equal hyper-parameters share one kernel call. Falls back to
    ``optimizer.step()`` for anything unusual (uninitialised state, amsgrad, weight decay, non-fused).
    """

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self._plans: dict[tuple[int, ...], list] = {}

    def step(self, groups: tuple[int, ...]) -> None:
        """Steps the parameter groups with these indices (all of whose parameters must have a gradient)."""
        opt = self.optimizer
        plan = self._plans.get(groups)
        if plan is None or not self._valid(plan):
            plan = self._build(groups)
            if plan is None:
                opt.step()
                return
            self._plans[groups] = plan
        for hyper, params, grads, exp_avgs, exp_avg_sqs, steps, _ in plan:
            lr, beta1, beta2, eps = hyper
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=lr, beta1=beta1, beta2=beta2,
                               weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)

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


def _hyper(group: dict) -> tuple:
    lr = group["lr"]
    return (float(lr) if isinstance(lr, torch.Tensor) else lr, *group["betas"], group["eps"])
