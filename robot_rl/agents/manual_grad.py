"""Hand-derived forward + backward of the state-only SAC update: no autograd graph, few ops, no allocation churn.

At HalfCheetah size (256x256 MLPs, batch 256) a CPU update is bound by the matmuls plus a large per-op and
per-allocation overhead. This path computes the gradients autograd computes for
:meth:`SACAgent._compute_losses` (``tests/agents`` compares them), with about half the ops (the TD target itself is
the critic's, :meth:`robot_rl.agents.critic.Critic.td_target`):

- the actor runs once on ``[next_obs; obs]`` (2B rows): the next-obs half feeds the target, the obs half the
  actor loss;
- the online critics run once on ``[(obs, action); (obs, actor action)]`` (2B rows): the first half gives the
  critic loss and the weight gradients, the second half the actor's dQ/da (through the critics' weights,
  without training them);
- every gradient is written straight into ``param.grad`` (``out=``), nothing is zeroed or accumulated;
- every large intermediate lives in a buffer reused across updates: fresh 0.5-1 MB tensors each update cost
  ~1000 page faults per update on this machine's allocator (glibc returns them to the OS between updates).

Supported: an encoder without trainable parameters (raw state, no cameras), scalar critics (MSE loss), with or
without LayerNorm in the critics and the actor, float32. Anything else uses the autograd path
(:func:`supports`), and so does a torch whose private ``aten`` ops used here are missing or changed
(:func:`op_probes`, :func:`manual_grad_available`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from robot_rl.agents.bc_loss import bc_term
from robot_rl.agents.torch_compat import Probe, available, check_close

if TYPE_CHECKING:
    from robot_rl.agents.base import Batch
    from robot_rl.agents.config import SACConfig
    from robot_rl.agents.critic import Critic
    from robot_rl.agents.encoders import ObservationEncoder
    from robot_rl.agents.networks import TanhGaussianActor

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_LOG2 = math.log(2.0)
_aten = torch.ops.aten  # private ops: every one used below is probed by op_probes


class SACModules(Protocol):
    """What this path reads of a :class:`~robot_rl.agents.sac.SACAgent` (typed by shape: sac imports this module, so
    this module does not import sac)."""

    cfg: SACConfig
    encoder: ObservationEncoder
    actor: TanhGaussianActor
    critic: Critic
    log_alpha: torch.Tensor
    target_entropy: float
    action_dim: int
    device: torch.device
    generator: torch.Generator


def supports(agent: SACModules) -> bool:
    """Whether the manual path can compute this agent's update (otherwise autograd does)."""
    cfg = agent.cfg
    return (not cfg.hl_gauss and not cfg.bf16 and not agent.encoder.has_pixels
            and not any(p.requires_grad for p in agent.encoder.parameters())
            and all(p.dtype == torch.float32 for p in agent.critic.net.parameters())
            and manual_grad_available())


def manual_grad_available() -> bool:
    """Whether every private op of the hand-derived SAC update exists and computes what it should (probed once per
    process through :func:`op_probes`, looked up at call time so tests can replace it or ``_aten``)."""
    return available("manual_grad", op_probes, "SAC updates use the autograd path")


def op_probes() -> list[Probe]:
    """One probe per private op of this path: calls it as the code below does, on tiny tensors, and checks the
    result against public ops (autograd for the backward ones)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, generator=gen)
    w, b = torch.randn(4, generator=gen), torch.randn(4, generator=gen)
    g = torch.randn(2, 3, 4, generator=gen)

    def layer_norm() -> None:
        for weight, bias in ((w, b), (None, None)):
            y, mean, rstd = _aten.native_layer_norm.out(
                x, [4], weight, bias, 1e-5, out0=torch.empty(2, 3, 4), out1=torch.empty(2, 3, 1),
                out2=torch.empty(2, 3, 1))
            check_close("native_layer_norm.out", y, torch.nn.functional.layer_norm(x, [4], weight, bias, 1e-5))
            check_close("native_layer_norm.out (mean)", mean, x.mean(-1, keepdim=True))
            check_close("native_layer_norm.out (rstd)", rstd, (x.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt())

    def layer_norm_backward() -> None:
        xr, wr, br = (t.clone().requires_grad_(True) for t in (x, w, b))
        want = torch.autograd.grad(torch.nn.functional.layer_norm(xr, [4], wr, br, 1e-5), (xr, wr, br), g)
        mean, rstd = x.mean(-1, keepdim=True), (x.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
        got = _aten.native_layer_norm_backward.out(
            g, x, [4], mean, rstd, w, b, [True, True, True], out0=torch.empty(2, 3, 4), out1=torch.empty(4),
            out2=torch.empty(4))
        for name, gt, wt in zip(("input", "weight", "bias"), got, want, strict=True):
            check_close(f"native_layer_norm_backward.out ({name})", gt, wt)

    def threshold_backward() -> None:
        relu_out = x.relu()
        got = _aten.threshold_backward.grad_input(g, relu_out, 0.0, grad_input=torch.empty(2, 3, 4))
        check_close("threshold_backward.grad_input", got, g * (relu_out > 0))

    return [("torch.ops.aten.native_layer_norm.out", layer_norm),
            ("torch.ops.aten.native_layer_norm_backward.out", layer_norm_backward),
            ("torch.ops.aten.threshold_backward.grad_input", threshold_backward)]


class _ActorLayer:
    """One actor layer: ``nn.Linear`` (+ optional ``nn.LayerNorm``) (+ ReLU unless it is the output layer)."""

    def __init__(self, linear: nn.Linear, norm: nn.LayerNorm | None, relu: bool) -> None:
        self.linear, self.norm, self.relu = linear, norm, relu


class ManualSACStep:
    """Computes the SAC losses' gradients of ``agent`` by hand and writes them into the parameters' ``.grad``."""

    def __init__(self, agent: SACModules) -> None:
        self.agent = agent
        self.cfg = cfg = agent.cfg
        mods = list(agent.actor.net)
        self.actor_layers: list[_ActorLayer] = []
        i = 0
        while i < len(mods):
            lin = mods[i]
            if not isinstance(lin, nn.Linear):
                raise TypeError(f"manual_grad: unexpected actor module {lin!r}")
            i += 1
            norm = None
            if i < len(mods) and isinstance(mods[i], nn.LayerNorm):
                norm = mods[i]
                i += 1
            relu = i < len(mods) and isinstance(mods[i], nn.ReLU)
            i += int(relu)
            self.actor_layers.append(_ActorLayer(lin, norm, relu))
        critic, target = agent.critic.net, agent.critic.target
        self.critic_norm = cfg.critic_layer_norm
        self.critic_linears = list(critic.linears) + [critic.head]
        self.critic_norms = list(critic.norms) if cfg.critic_layer_norm else []
        self.target_linears = list(target.linears) + [target.head]
        self.target_norms = list(target.norms) if cfg.critic_layer_norm else []
        self.ln_eps = critic.norms[0].eps if cfg.critic_layer_norm else 1e-5
        self.critic_params = list(critic.parameters())
        self.actor_params = list(agent.actor.parameters())
        # Gradient storage: one flat buffer per network, each parameter's .grad a view into it.
        self.critic_grads = _flat_views(self.critic_params)
        self.actor_grads = _flat_views(self.actor_params)
        grad_of = {id(p): g for p, g in zip(self.critic_params + self.actor_params,
                                            self.critic_grads + self.actor_grads)}

        def pair(module: nn.Module | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
            return (None, None) if module is None else (grad_of[id(module.weight)], grad_of[id(module.bias)])

        self.critic_layer_grads = [
            (*pair(lin), *pair(self.critic_norms[i] if i < len(self.critic_norms) else None))
            for i, lin in enumerate(self.critic_linears)]
        self.actor_layer_grads = [(*pair(layer.linear), *pair(layer.norm)) for layer in self.actor_layers]
        self.alpha_grad = torch.zeros_like(agent.log_alpha)
        self.log_std_min, self.log_std_max = agent.actor.log_std_min, agent.actor.log_std_max
        self._buffers: dict[object, torch.Tensor] = {}

    def _buf(self, key: object, *shape: int) -> torch.Tensor:
        """A reused work buffer (contents undefined)."""
        b = self._buffers.get(key)
        if b is None or b.shape != shape:
            b = self._buffers[key] = torch.empty(shape, device=self.agent.device)
        return b

    # ------------------------------------------------------------------ public
    def compute_grads(self, mb: Batch, alpha: torch.Tensor, members: torch.Tensor, update_actor: bool,
                      eps: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Fills ``.grad`` of the critic (and, with ``update_actor``, of actor and log_alpha; otherwise their
        ``.grad`` is set to None so the optimizer leaves them alone). Returns the metrics as 0-d tensors.

        ``eps`` (``[2, B, A]``: next-action noise, then actor-action noise; ``[1, B, A]`` without the actor)
        replaces the policy's Gaussian draws (tests); by default it comes from the agent's generator, next-action
        noise first, as in the autograd path.
        """
        with torch.no_grad():
            return self._compute_grads(mb, alpha, members, update_actor, eps)

    def _compute_grads(self, mb: Batch, alpha: torch.Tensor, members: torch.Tensor, update_actor: bool,
                       eps: torch.Tensor | None) -> dict[str, torch.Tensor]:
        cfg, buf = self.cfg, self._buf
        # The encoder has no trainable part here: the standardised state (and the instruction embedding, if any).
        obs = self.agent.encoder(mb["obs"])
        next_obs = self.agent.encoder(mb["next_obs"])
        n, d = obs.shape
        a_dim = self.agent.action_dim
        rows = 2 * n if update_actor else n
        if eps is None:
            eps = torch.randn(rows // n, n, a_dim, device=obs.device, generator=self.agent.generator)
        eps = eps.reshape(rows, a_dim)

        # ---- policy on [next_obs; obs] (the obs rows only when the actor learns)
        x_pi = buf("x_pi", rows, d)
        x_pi[:n] = next_obs
        if update_actor:
            x_pi[n:] = obs
        actor_cache: list = []
        out = self._actor_forward(x_pi, actor_cache)
        mu, raw_log_std = out[:, :a_dim], out[:, a_dim:]
        t = torch.tanh(raw_log_std)
        k = 0.5 * (self.log_std_max - self.log_std_min)
        log_std = t.mul(k).add_(self.log_std_min + k)
        std = log_std.exp()
        pre = torch.addcmul(mu, eps, std)
        act = torch.tanh(pre)
        # log N(pre; mu, std) - sum log(1 - tanh^2 pre), as TanhGaussianActor.forward computes it.
        sp = torch.nn.functional.softplus(pre.mul(-2.0))
        logp = eps.square().mul_(-0.5).sub_(log_std).add_(sp.add_(pre).mul_(2.0)).sum(-1)
        logp.sub_(a_dim * (_HALF_LOG_2PI + 2 * _LOG2))

        # ---- target: min over the random subset of target critics
        x_next = buf("x_next", n, d + a_dim)
        x_next[:, :d] = next_obs
        x_next[:, d:] = act[:n]
        q_next = self._target_q(x_next, members).amin(0)
        if cfg.backup_entropy:
            q_next = q_next.sub_(alpha * logp[:n])
        target = self.agent.critic.td_target(mb, q_next)

        # ---- online critics on [(obs, action); (obs, actor action)]
        x_q = buf("x_q", rows, d + a_dim)
        x_q[:n, :d] = obs
        x_q[:n, d:] = mb["action"].reshape(-1, a_dim)
        if update_actor:
            x_q[n:, :d] = obs
            x_q[n:, d:] = act[n:]
        critic_cache: list = []
        q = self._critic_forward(x_q, critic_cache).squeeze(-1)  # [E, rows]
        e = q.shape[0]
        q_data = q[:, :n]
        diff = q_data - target
        critic_loss = diff.square().mean()
        metrics = {"critic_loss": critic_loss, "q_mean": q_data.mean()}

        # ---- backward: critic loss = mean (Q - target)^2, actor loss = mean_b(alpha logp - mean_e Q)
        dq = buf("dq", e, rows, 1)
        torch.mul(diff.unsqueeze(-1), 2.0 / (e * n), out=dq[:, :n])
        if update_actor:
            dq[:, n:] = -1.0 / (e * n)
        d_act = self._critic_backward(dq, critic_cache, n, d if update_actor else None)
        log_alpha = self.agent.log_alpha
        if update_actor:
            assert d_act is not None
            d_act = d_act.sum(0)  # dL/d(actor action) [B, A]
            a_pi, logp_pi = act[n:], logp[n:]
            actor_loss = (alpha * logp_pi - q[:, n:].mean(0)).mean()
            entropy = -logp_pi.mean()
            # dL/dpre = dL/da (1 - a^2) + (alpha / B) dlogp/dpre, with dlogp/dpre = 2 tanh(pre) = 2a;
            # dL/dlog_std = dL/dpre eps std - alpha / B; dlog_std/draw = k (1 - tanh^2 raw).
            coef = alpha / n
            d_pre = torch.addcmul(d_act, d_act, a_pi.square(), value=-1.0).add_(a_pi * (2.0 * coef))
            d_mu = d_pre.clone() if cfg.bc_weight > 0 else d_pre  # dL/dmu = dL/dpre, plus the BC term below
            d_log_std = torch.addcmul(-coef, d_pre, eps[n:] * std[n:])
            d_raw = d_log_std.mul_(t[n:].square().neg_().add_(1.0).mul_(k))
            if cfg.bc_weight > 0:  # w * mean_masked ||tanh(mu) - a||^2: d/dmu = w 2 (m - a)(1 - m^2) mask / count
                m = torch.tanh(mu[n:])
                bc_loss, bc_rows, mask = bc_term(m, mb, q_data.mean(0), q[:, n:].mean(0), cfg.bc_q_filter)
                scale = (2.0 * cfg.bc_weight) * mask / bc_rows.clamp_min(1.0)
                d_mu.addcmul_((m - mb["action"].reshape(m.shape)) * (1.0 - m.square()), scale.unsqueeze(1))
                actor_loss = actor_loss + cfg.bc_weight * bc_loss
                metrics.update(bc_loss=bc_loss, bc_rows=bc_rows)
            self._actor_backward(torch.cat([d_mu, d_raw], 1), actor_cache, n)
            torch.mul(log_alpha.exp(), entropy - self.agent.target_entropy, out=self.alpha_grad)
            for p, g in zip(self.actor_params, self.actor_grads):
                p.grad = g
            log_alpha.grad = self.alpha_grad
            metrics.update(actor_loss=actor_loss, entropy=entropy)
        else:
            for p in self.actor_params:
                p.grad = None
            log_alpha.grad = None
        for p, g in zip(self.critic_params, self.critic_grads):
            p.grad = g
        return metrics

    # ----------------------------------------------------------------- actor
    def _actor_forward(self, x: torch.Tensor, cache: list) -> torch.Tensor:
        rows = x.shape[0]
        for i, layer in enumerate(self.actor_layers):
            lin = layer.linear
            y = torch.addmm(lin.bias, x, lin.weight.t(), out=self._buf(("a_lin", i), rows, lin.out_features))
            entry = [x, y, None, None, None]
            if layer.norm is not None:
                norm = layer.norm
                y, entry[2], entry[3] = _aten.native_layer_norm.out(
                    y, norm.normalized_shape, norm.weight, norm.bias, norm.eps,
                    out0=self._buf(("a_ln", i), *y.shape), out1=self._buf(("a_mu", i), rows, 1),
                    out2=self._buf(("a_rstd", i), rows, 1))
            if layer.relu:
                entry[4] = y = y.relu_()
            cache.append(entry)
            x = y
        return x

    def _actor_backward(self, d_out: torch.Tensor, cache: list, n: int) -> None:
        """Backward of the actor from ``d_out``, for the last ``n`` rows of the cached forward."""
        g = d_out
        for i in range(len(self.actor_layers) - 1, -1, -1):
            layer = self.actor_layers[i]
            x, y, mean, rstd, relu_out = cache[i]
            r = slice(x.shape[0] - n, None)
            gw_lin, gb_lin, gw_norm, gb_norm = self.actor_layer_grads[i]
            if layer.relu:
                g = _aten.threshold_backward.grad_input(g, relu_out[r], 0.0,
                                                        grad_input=self._buf(("a_dr", i), *g.shape))
            if layer.norm is not None:
                norm = layer.norm
                g = _aten.native_layer_norm_backward.out(
                    g, y[r], norm.normalized_shape, mean[r], rstd[r], norm.weight, norm.bias, [True, True, True],
                    out0=self._buf(("a_dln", i), *g.shape), out1=gw_norm, out2=gb_norm)[0]
            torch.mm(g.t(), x[r], out=gw_lin)
            torch.sum(g, 0, out=gb_lin)
            if i > 0:
                g = torch.mm(g, layer.linear.weight, out=self._buf(("a_dx", i), n, layer.linear.in_features))

    # ---------------------------------------------------------------- critic
    def _ln_ones(self, h: int) -> tuple[torch.Tensor, torch.Tensor]:
        ones = self._buffers.get(("ones", h))
        if ones is None:
            ones = self._buffers["ones", h] = torch.ones(h, device=self.agent.device)
            self._buffers["zeros", h] = torch.zeros(h, device=self.agent.device)
        return ones, self._buffers["zeros", h]

    def _critic_forward(self, x: torch.Tensor, cache: list) -> torch.Tensor:
        e = self.critic_linears[0].weight.shape[0]
        rows = x.shape[0]
        h = x.unsqueeze(0).expand(e, -1, -1)
        last = len(self.critic_linears) - 1
        for i, lin in enumerate(self.critic_linears):
            width = lin.weight.shape[-1]
            y = torch.baddbmm(lin.bias, h, lin.weight, out=self._buf(("c_lin", i), e, rows, width))
            entry = [h, y, None, None, None, None]
            if i < last:
                if self.critic_norm:
                    norm = self.critic_norms[i]
                    xhat, entry[3], entry[4] = _aten.native_layer_norm.out(
                        y, [width], None, None, self.ln_eps, out0=self._buf(("c_xhat", i), e, rows, width),
                        out1=self._buf(("c_mu", i), e, rows, 1), out2=self._buf(("c_rstd", i), e, rows, 1))
                    entry[2] = xhat
                    y = torch.addcmul(norm.bias, xhat, norm.weight, out=self._buf(("c_ln", i), e, rows, width))
                entry[5] = y = y.relu_()
            cache.append(entry)
            h = y
        return h

    def _critic_backward(self, dq: torch.Tensor, cache: list, n: int, action_from: int | None) -> torch.Tensor | None:
        """Weight gradients from the first ``n`` rows; with ``action_from``, returns the gradient of the input
        columns ``action_from:`` (the action) for the rows after them, ``[E, rows - n, A]``."""
        g = dq
        last = len(self.critic_linears) - 1
        for i in range(last, -1, -1):
            h, y, xhat, mean, rstd, relu_out = cache[i]
            lin = self.critic_linears[i]
            gw, gb, gw_norm, gb_norm = self.critic_layer_grads[i]
            if i < last:
                g = _aten.threshold_backward.grad_input(g, relu_out, 0.0, grad_input=self._buf(("c_dr", i), *g.shape))
                if self.critic_norm:
                    norm = self.critic_norms[i]
                    gd = g[:, :n]
                    torch.sum(torch.mul(gd, xhat[:, :n], out=self._buf(("c_gx", i), *gd.shape)), 1, keepdim=True,
                              out=gw_norm)
                    torch.sum(gd, 1, keepdim=True, out=gb_norm)
                    width = g.shape[-1]
                    ones, zeros = self._ln_ones(width)
                    g = _aten.native_layer_norm_backward.out(
                        torch.mul(g, norm.weight, out=self._buf(("c_dxhat", i), *g.shape)), y, [width], mean, rstd,
                        ones, zeros, [True, True, True], out0=self._buf(("c_dln", i), *g.shape),
                        out1=self._buf(("c_scratch_w", i), width), out2=self._buf(("c_scratch_b", i), width))[0]
            gd = g[:, :n]
            torch.bmm(h[:, :n].transpose(1, 2), gd, out=gw)
            torch.sum(gd, 1, keepdim=True, out=gb)
            if i > 0:
                shape = (*g.shape[:2], lin.weight.shape[1])
                if lin.weight.shape[-1] == 1:  # the head: an outer product, no matmul needed
                    g = torch.mul(g, lin.weight.transpose(1, 2), out=self._buf(("c_dx", i), *shape))
                else:
                    g = torch.bmm(g, lin.weight.transpose(1, 2), out=self._buf(("c_dx", i), *shape))
            elif action_from is not None:
                return torch.bmm(g[:, n:], lin.weight[:, action_from:].transpose(1, 2))
        return None

    def _target_q(self, x: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        e = self.target_linears[0].weight.shape[0]
        m = members.numel()
        subset = m < e  # min over all members does not depend on their order
        rows = x.shape[0]
        h = x.unsqueeze(0).expand(m, -1, -1)
        last = len(self.target_linears) - 1

        def pick(p: torch.Tensor, key: object) -> torch.Tensor:
            return torch.index_select(p, 0, members, out=self._buf(key, m, *p.shape[1:])) if subset else p

        for i, lin in enumerate(self.target_linears):
            width = lin.weight.shape[-1]
            h = torch.baddbmm(pick(lin.bias, ("t_b", i)), h, pick(lin.weight, ("t_w", i)),
                              out=self._buf(("t_lin", i), m, rows, width))
            if i < last:
                if self.critic_norm:
                    norm = self.target_norms[i]
                    xhat = _aten.native_layer_norm.out(
                        h, [width], None, None, self.ln_eps, out0=self._buf(("t_xhat", i), m, rows, width),
                        out1=self._buf(("t_mu", i), m, rows, 1), out2=self._buf(("t_rstd", i), m, rows, 1))[0]
                    h = torch.addcmul(pick(norm.bias, ("t_nb", i)), xhat, pick(norm.weight, ("t_nw", i)),
                                      out=self._buf(("t_ln", i), m, rows, width))
                h = h.relu_()
        return h.squeeze(-1)


def _flat_views(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """Views of one zeroed flat buffer shaped like ``params`` (in order)."""
    flat = torch.zeros(sum(p.numel() for p in params), device=params[0].device, dtype=params[0].dtype)
    views, offset = [], 0
    for p in params:
        views.append(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()
    return views
