"""Private torch APIs of the fast update path (robot_rl.agents.torch_compat): each is probed, and where one is
missing, raises or computes something else, SAC takes the public path (autograd, torch.optim.Adam's own step, a
loop of Tensor.lerp_) and learns the same. Absence is simulated by removing the op from torch (or from the
``aten`` namespace manual_grad calls) and clearing the probes' cache."""

from __future__ import annotations

import copy
import inspect
import logging
import types

import numpy as np
import pytest
import torch

from robot_rl.agents import SACAgent, SACConfig, manual_grad, torch_compat
from robot_rl.agents.fused_adam import FusedAdamStep
from robot_rl.spaces import ObsSpec

D, A, B = 3, 2, 16
AUTOGRAD_ATOL = 1e-6


@pytest.fixture(autouse=True)
def fresh_probes():
    """Every test probes afresh, and leaves no answer from a simulated absence behind (runs after monkeypatch's
    undo: this fixture is set up first, so it is torn down last)."""
    torch_compat.clear_cache()
    yield
    torch_compat.clear_cache()


@pytest.fixture
def warnings_logged():
    """The warnings torch_compat logs (whatever level an earlier test configured for robot_rl)."""
    logger = logging.getLogger(torch_compat.__name__)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    level = logger.level
    logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


def make(**kw) -> SACAgent:
    return SACAgent(ObsSpec(state_dim=D), A, SACConfig(num_critics=2, hidden_dims=(32, 32), batch_size=B, **kw))


def clone(state: dict, **kw) -> SACAgent:
    """A new agent (built under whatever torch the test simulates) in exactly ``state``."""
    agent = make(**kw)
    agent.load_state_dict(copy.deepcopy(state))  # optimizer.load_state_dict keeps the state tensors it is given
    return agent


def batch(seed: int, utd: int = 2) -> dict:
    rng = np.random.default_rng(seed)

    def obs() -> dict:
        return {"state": rng.standard_normal((utd, B, D)).astype(np.float32)}
    return {"obs": obs(), "next_obs": obs(), "action": rng.uniform(-1, 1, (utd, B, A)).astype(np.float32),
            "reward": rng.standard_normal((utd, B)).astype(np.float32), "terminated": rng.random((utd, B)) < 0.1}


def params(agent: SACAgent) -> dict[str, torch.Tensor]:
    out = {f"actor.{k}": v for k, v in agent.actor.state_dict().items()}
    out.update({f"critic.{k}": v for k, v in agent.critic.net.state_dict().items()})
    out.update({f"target.{k}": v for k, v in agent.critic.target.state_dict().items()})
    out["log_alpha"] = agent.log_alpha.detach()
    return {k: v.detach().clone() for k, v in out.items()}


def assert_same_params(got: SACAgent, want: SACAgent, atol: float) -> None:
    g, w = params(got), params(want)
    assert g.keys() == w.keys()
    for k in g:
        torch.testing.assert_close(g[k], w[k], atol=atol, rtol=1e-5, msg=lambda m, k=k: f"{k}: {m}")


def missing_op_message(records: list[logging.LogRecord], op: str) -> str:
    messages = [r.getMessage() for r in records]
    assert len(messages) == 1, messages
    assert op in messages[0], messages
    return messages[0]


# ----------------------------------------------------------------------- probes
def test_every_capability_is_available_on_the_supported_torch(warnings_logged):
    assert manual_grad.manual_grad_available()
    assert torch_compat.fused_adam_available()
    assert torch_compat.foreach_lerp_available()
    assert make()._manual is not None  # the CPU default takes the hand-derived path
    assert warnings_logged == []


# ------------------------------------------------------------------ manual grad
def aten_without(*missing: str) -> types.SimpleNamespace:
    """The ``aten`` ops manual_grad calls, less ``missing``."""
    ops = ("native_layer_norm", "native_layer_norm_backward", "threshold_backward")
    return types.SimpleNamespace(**{op: getattr(torch.ops.aten, op) for op in ops if op not in missing})


def raising(*args, **kwargs):
    raise TypeError("native_layer_norm() got an unexpected keyword argument 'out0'")


@pytest.mark.parametrize("aten, op", [
    (types.SimpleNamespace(), "native_layer_norm"),  # no aten op at all
    (aten_without("native_layer_norm_backward"), "native_layer_norm_backward"),
    (aten_without("threshold_backward"), "threshold_backward"),
    # present but changed: raises at call time, or returns something else
    (types.SimpleNamespace(**{**vars(aten_without()), "native_layer_norm": types.SimpleNamespace(out=raising)}),
     "native_layer_norm.out"),
    (types.SimpleNamespace(**{**vars(aten_without()), "threshold_backward": types.SimpleNamespace(
        grad_input=lambda g, out, threshold, grad_input: grad_input.copy_(g))}), "threshold_backward.grad_input"),
], ids=["no-aten", "no-layer-norm-backward", "no-threshold-backward", "changed-signature", "wrong-result"])
def test_missing_aten_op_falls_back_to_autograd(monkeypatch, warnings_logged, aten, op):
    reference = make(manual_grad=False)
    state = copy.deepcopy(reference.state_dict())
    reference.update(batch(0))

    monkeypatch.setattr(manual_grad, "_aten", aten)
    agent = clone(state)  # manual_grad=None: the CPU default would take the hand-derived path
    assert agent._manual is None
    assert not manual_grad.manual_grad_available()
    assert not manual_grad.supports(agent)
    message = missing_op_message(warnings_logged, op)
    assert "autograd" in message
    agent.update(batch(0))
    assert_same_params(agent, reference, atol=0.0)  # the very same autograd update
    make(manual_grad=True)  # asked for explicitly: still autograd, and no second warning
    assert len(warnings_logged) == 1


def test_manual_grad_probe_is_cached(monkeypatch):
    calls = []
    probes = manual_grad.op_probes

    def counting():
        calls.append(1)
        return probes()
    monkeypatch.setattr(manual_grad, "op_probes", counting)
    for _ in range(3):
        assert make()._manual is not None
    assert len(calls) == 1


# ------------------------------------------------------------------- fused adam
def grads_for(model: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen)


def tiny_model_and_adam() -> tuple[torch.nn.Module, torch.optim.Adam]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3))
    opt = torch.optim.Adam([{"params": model[0].parameters(), "lr": 1e-2},
                            {"params": model[1].parameters(), "lr": 3e-3, "betas": (0.5, 0.9)}], fused=True)
    return model, opt


def run_adam_steps(model: torch.nn.Module, opt: torch.optim.Adam) -> list[dict[str, torch.Tensor]]:
    """Both groups, then only group 0 (group 1 has gradients it must not use), then both again."""
    adam = FusedAdamStep(opt)
    snapshots = []
    for seed, groups in enumerate([(0, 1), (0,), (0, 1), (0, 1)]):
        grads_for(model, seed)
        adam.step(groups)
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    return snapshots


def test_fused_adam_fallback_steps_the_same_groups_with_the_same_maths(monkeypatch, warnings_logged):
    model, opt = tiny_model_and_adam()
    want = run_adam_steps(model, opt)
    want_state = copy.deepcopy(opt.state_dict()["state"])

    monkeypatch.delattr(torch, "_fused_adam_")
    torch_compat.clear_cache()
    model, opt = tiny_model_and_adam()
    got = run_adam_steps(model, opt)
    assert not torch_compat.fused_adam_available()
    missing_op_message(warnings_logged, "torch._fused_adam_")
    for g, w in zip(got, want, strict=True):
        for k in w:
            torch.testing.assert_close(g[k], w[k], atol=1e-6, rtol=1e-5)
    # the group-0-only step left group 1 alone
    for k in ("1.weight", "1.bias"):
        torch.testing.assert_close(got[1][k], got[0][k], atol=0.0, rtol=0.0)
    state = opt.state_dict()["state"]
    for i in want_state:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(state[i][key], want_state[i][key], atol=1e-6, rtol=1e-5)
    assert not any(g["fused"] for g in opt.param_groups)


def test_fused_adam_kernel_with_a_different_result_is_not_used(monkeypatch, warnings_logged):
    monkeypatch.setattr(torch, "_fused_adam_", lambda *args, **kwargs: None)  # "works" but steps nothing
    assert not torch_compat.fused_adam_available()
    missing_op_message(warnings_logged, "torch._fused_adam_")
    model, opt = tiny_model_and_adam()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    run_adam_steps(model, opt)
    assert all(not torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("warm", [False, True], ids=["first-update", "later-update"])
@pytest.mark.parametrize("manual", [False, True], ids=["autograd", "manual"])
def test_sac_update_without_fused_adam_matches(monkeypatch, warnings_logged, manual, warm):
    reference = make(manual_grad=manual)
    if warm:  # the optimizer state exists: the reference takes the fused kernel itself
        reference.update(batch(1))
    state = copy.deepcopy(reference.state_dict())
    reference.update(batch(0))

    monkeypatch.delattr(torch, "_fused_adam_")
    torch_compat.clear_cache()
    agent = clone(state, manual_grad=manual)
    assert (agent._manual is not None) == manual  # the gradients do not need the fused kernel
    agent.update(batch(0))
    assert not any(g["fused"] for g in agent.critic.optimizer.param_groups)  # the loaded state said fused=True
    missing_op_message(warnings_logged, "torch._fused_adam_")
    assert_same_params(agent, reference, atol=AUTOGRAD_ATOL)


# ---------------------------------------------------------------- target lerp
def test_foreach_lerp_fallback_equals_foreach_lerp(monkeypatch, warnings_logged):
    gen = torch.Generator().manual_seed(0)
    shapes = [(3, 4), (5,), (2, 3, 2), ()]
    targets = [torch.randn(s, generator=gen) for s in shapes]
    sources = [torch.randn(s, generator=gen) for s in shapes]
    want = [t.clone() for t in targets]
    torch._foreach_lerp_(want, sources, 0.005)

    monkeypatch.delattr(torch, "_foreach_lerp_")
    got = [t.clone() for t in targets]
    torch_compat.foreach_lerp_(got, sources, 0.005)
    assert not torch_compat.foreach_lerp_available()
    missing_op_message(warnings_logged, "torch._foreach_lerp_")
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-7, rtol=1e-6)


@pytest.mark.skipif("torch._foreach_lerp_" in inspect.getsource(SACAgent),
                    reason="sac.py still calls torch._foreach_lerp_ itself, not torch_compat.foreach_lerp_")
def test_sac_update_without_foreach_lerp_matches(monkeypatch):
    reference = make()
    state = copy.deepcopy(reference.state_dict())
    reference.update(batch(0))

    monkeypatch.delattr(torch, "_foreach_lerp_")
    torch_compat.clear_cache()
    agent = clone(state)
    agent.update(batch(0))
    assert_same_params(agent, reference, atol=1e-7)
