"""The private torch APIs of the fast update path, each behind a probe, with a public fallback.

The hand-derived SAC update (:mod:`robot_rl.agents.manual_grad`), the fused Adam step
(:mod:`robot_rl.agents.fused_adam`) and the target-network update call private torch ops (``torch.ops.aten.*``
``.out`` overloads, ``torch._fused_adam_``, ``torch._foreach_*``) whose names or signatures may change between
torch releases. Each capability is probed once per process on tiny tensors, with the exact call signature the
code uses, and checked against public ops; a missing op, one that raises or one that computes something else
turns the capability off with one warning, and the code takes its public path (autograd, ``torch.optim.Adam``'s
own step, a loop of ``Tensor.lerp_``). :func:`clear_cache` forgets the answers (tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from robot_rl.utils.log import get_logger

_log = get_logger(__name__)
_cache: dict[str, bool] = {}

Probe = tuple[str, Callable[[], None]]
"""``(op name, function)``: the function calls the op as the code does and raises if it is missing or wrong."""


def clear_cache() -> None:
    """Forgets every probe's answer: the next query probes again (tests that simulate a missing op)."""
    _cache.clear()


def available(capability: str, probes: Callable[[], Sequence[Probe]], fallback: str) -> bool:
    """Runs ``probes`` once (cached): False, with one warning naming the op, when one of them raises. The hand-derived
    update's own capability (:func:`robot_rl.agents.manual_grad.manual_grad_available`) is probed through this too."""
    ok = _cache.get(capability)
    if ok is not None:
        return ok
    ok = True
    for op, probe in probes():
        try:
            probe()
        except Exception as e:  # a missing op, a changed signature or a wrong result alike
            _log.warning("torch %s: %s is missing or does not work as expected (%s: %s); %s",
                         torch.__version__, op, type(e).__name__, e, fallback)
            ok = False
            break
    _cache[capability] = ok
    return ok


def check_close(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    """Raises ``AssertionError`` unless a probe's result matches the reference (float32 tolerance)."""
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise AssertionError(f"{name} computed a different result than the reference")


# ------------------------------------------------------------------- fused adam
def fused_adam_(params: list[torch.Tensor], grads: list[torch.Tensor], exp_avgs: list[torch.Tensor],
                exp_avg_sqs: list[torch.Tensor], steps: list[torch.Tensor], lr: float, beta1: float, beta2: float,
                eps: float) -> None:
    """One Adam step (no weight decay, no amsgrad) of the listed tensors: ``steps`` += 1, then the fused kernel."""
    torch._foreach_add_(steps, 1)
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=lr, beta1=beta1, beta2=beta2,
                       weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)


def _fused_adam_probes() -> list[Probe]:
    def foreach_add() -> None:
        steps = [torch.zeros(()), torch.ones(())]
        torch._foreach_add_(steps, 1)
        check_close("torch._foreach_add_", torch.stack(steps), torch.tensor([1.0, 2.0]))

    def fused_adam() -> None:
        gen = torch.Generator().manual_seed(0)
        p, g, m, v = (torch.randn(3, 2, generator=gen) for _ in range(4))
        v = v.abs()
        step = torch.zeros(())
        lr, b1, b2, eps = 0.1, 0.9, 0.99, 1e-8
        want_m = b1 * m + (1 - b1) * g
        want_v = b2 * v + (1 - b2) * g * g
        denom = (want_v / (1 - b2)).sqrt() + eps
        want_p = p - lr / (1 - b1) * want_m / denom
        fused_adam_([p], [g], [m], [v], [step], lr, b1, b2, eps)
        for name, got, want in (("param", p, want_p), ("exp_avg", m, want_m), ("exp_avg_sq", v, want_v),
                                ("step", step, torch.ones(()))):
            check_close(f"torch._fused_adam_ ({name})", got, want)

    return [("torch._foreach_add_", foreach_add), ("torch._fused_adam_", fused_adam)]


def fused_adam_available() -> bool:
    """Whether ``torch._fused_adam_`` (and ``torch._foreach_add_`` on the step counters) work as
    :class:`~robot_rl.agents.fused_adam.FusedAdamStep` calls them."""
    return available("fused_adam", _fused_adam_probes, "Adam steps use torch.optim.Adam's non-fused implementation")


# ----------------------------------------------------------------- target lerp
def _foreach_lerp_probes() -> list[Probe]:
    def foreach_lerp() -> None:
        targets = [torch.zeros(2, 3), torch.ones(4)]
        sources = [torch.arange(6.0).view(2, 3), torch.full((4,), 3.0)]
        want = [t.lerp(s, 0.25) for t, s in zip(targets, sources)]
        torch._foreach_lerp_(targets, sources, 0.25)
        for got, w in zip(targets, want):
            check_close("torch._foreach_lerp_", got, w)

    return [("torch._foreach_lerp_", foreach_lerp)]


def foreach_lerp_available() -> bool:
    """Whether ``torch._foreach_lerp_`` works (otherwise :func:`foreach_lerp_` loops over ``Tensor.lerp_``)."""
    return available("foreach_lerp", _foreach_lerp_probes, "target updates use a loop of Tensor.lerp_")


def foreach_lerp_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor], weight: float) -> None:
    """``target += weight * (source - target)`` for each pair, in place (the Polyak target-network update)."""
    if foreach_lerp_available():
        torch._foreach_lerp_(targets, sources, weight)
        return
    for t, s in zip(targets, sources, strict=True):
        t.lerp_(s, weight)


__all__ = ["available", "check_close", "clear_cache", "foreach_lerp_", "foreach_lerp_available", "fused_adam_",
           "fused_adam_available"]
