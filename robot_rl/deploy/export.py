"""Exporting a trained policy for deployment without the training stack: ONNX (run by onnxruntime, see
robot_rl.deploy.runner) or TorchScript (run by libtorch / torch.jit.load).

The exported graph is the agent's deterministic action from an observation, normalisation included (the state
standardisation, the uint8 -> float frame scaling of every camera, the tanh squashing): inputs ``state`` float32
``[B, D]``, then ``pixels.<camera>`` uint8 ``[B, H, W, 3]`` per camera (sorted by name), then ``instruction`` float32
``[B, E]`` for a language-conditioned task; output ``action`` float32 ``[B, A]`` in ``[-1, 1]``. ``deploy.json``
beside it records these, the env's action bounds (``action_low`` / ``action_high``: an action ``a`` in [-1, 1]
means ``low + (a + 1) / 2 * (high - low)`` in the env's units), the control rate and where it came from. Every
export is checked against the torch policy on recorded observations before it is written out as done.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

from robot_rl.agents.base import capabilities
from robot_rl.config import load_yaml
from robot_rl.envs.instructions import instruction_table
from robot_rl.envs.make import make_env
from robot_rl.replay.store import load_buffer
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.utils.run_dir import latest_checkpoint

FORMATS = ("onnx", "torchscript")
FILES = {"onnx": "policy.onnx", "torchscript": "policy.pt"}


class DeterministicPolicy(nn.Module):
    """An agent's deterministic action with positional tensor inputs (the order :func:`input_spec` lists)."""

    def __init__(self, agent: Any) -> None:
        super().__init__()
        if not capabilities(type(agent)).exportable:
            raise ValueError(f"agent {agent.name!r} cannot be exported: it declares no deterministic_module() (agents "
                             "that act on a base policy export the base and the agent separately)")
        self.net = agent.deterministic_module()
        self.cameras = tuple(sorted(agent.obs_spec.cameras))
        self.instruction = agent.obs_spec.instruction_dim > 0

    def forward(self, state: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        obs: dict[str, Any] = {"state": state, "pixels": dict(zip(self.cameras, rest[: len(self.cameras)]))}
        if self.instruction:
            obs["instruction"] = rest[len(self.cameras)]
        return self.net(obs)


def input_spec(obs_spec: Any) -> list[tuple[str, list[int], str]]:
    """``(name, shape without the batch axis, dtype)`` of the exported graph's inputs, in order."""
    out = [("state", [obs_spec.state_dim], "float32")]
    out += [(f"pixels.{c}", list(obs_spec.cameras[c]), "uint8") for c in sorted(obs_spec.cameras)]
    if obs_spec.instruction_dim:
        out.append(("instruction", [obs_spec.instruction_dim], "float32"))
    return out


def observation_arrays(obs: Mapping[str, Any], obs_spec: Any) -> list[np.ndarray]:
    """A batch of observations (the replay's / env's nesting) as the graph's positional inputs."""
    arrays = [np.asarray(obs["state"], np.float32)]
    arrays += [np.asarray(obs["pixels"][c], np.uint8) for c in sorted(obs_spec.cameras)]
    if obs_spec.instruction_dim:
        arrays.append(np.asarray(obs["instruction"], np.float32))
    return arrays


def export_policy(agent: Any, fmt: str, out: str | Path, example: Mapping[str, Any],
                  info: Mapping[str, Any] | None = None, tolerance: float = 1e-5) -> dict[str, Any]:
    """Writes ``agent``'s deterministic policy to ``out`` (a folder) as ``fmt`` and checks it against torch on
    ``example`` (a batch of recorded observations); returns what ``deploy.json`` holds, with the largest
    difference found (``check_max_abs_diff``). Raises ValueError when it exceeds ``tolerance``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    policy = DeterministicPolicy(agent).eval()
    arrays = observation_arrays(example, agent.obs_spec)
    inputs = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)
    spec = input_spec(agent.obs_spec)
    names = [n for n, _, _ in spec]
    path = out / FILES[fmt]
    with torch.no_grad():
        expected = policy(*inputs).numpy()
        if fmt == "onnx":
            batch = torch.export.Dim("batch", min=1, max=4096)
            torch.onnx.export(policy, inputs, str(path), input_names=names, output_names=["action"], dynamo=True,
                              dynamic_shapes=_batch_axes(len(inputs), batch), external_data=False)
            got = _run_onnx(path, names, arrays)
        else:
            scripted = torch.jit.trace(policy, inputs, check_trace=False)
            scripted.save(str(path))
            got = torch.jit.load(str(path))(*inputs).numpy()
    diff = float(np.max(np.abs(got - expected))) if expected.size else 0.0
    if not diff <= tolerance:
        raise ValueError(f"exported {fmt} policy differs from the torch policy by {diff:.2e} (> {tolerance:.0e}) "
                         f"on {len(expected)} recorded observations")
    meta = {"format": fmt, "file": path.name, "inputs": [{"name": n, "shape": s, "dtype": d} for n, s, d in spec],
            "output": {"name": "action", "shape": [agent.action_dim], "range": [-1.0, 1.0]},
            "check_max_abs_diff": diff, "check_observations": len(expected), **dict(info or {})}
    (out / "deploy.json").write_text(json.dumps(meta, indent=1))
    return meta


def _batch_axes(n_inputs: int, batch: Any) -> tuple:
    """torch.export's dynamic shapes for ``forward(state, *rest)``: the batch axis of every input."""
    rest = tuple({0: batch} for _ in range(n_inputs - 1))
    return ({0: batch}, rest) if rest else ({0: batch},)


def _run_onnx(path: Path, names: list[str], arrays: list[np.ndarray]) -> np.ndarray:
    import onnxruntime as ort  # optional: export

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["action"], dict(zip(names, arrays)))[0]


def env_action_bounds(env: Any) -> tuple[list[float], list[float]]:
    """The wrapped env's own action bounds (robot_rl's env adapter maps [-1, 1] onto them), else [-1, 1]."""
    e = env
    while e is not None:
        if hasattr(e, "_low") and hasattr(e, "_half"):
            low = np.asarray(e._low, np.float64)
            return low.tolist(), (low + 2.0 * np.asarray(e._half, np.float64)).tolist()
        e = getattr(e, "env", None)
    dim = int(np.prod(env.action_space.shape))
    return [-1.0] * dim, [1.0] * dim


def recorded_observations(run_dir: str | Path, count: int, seed: int = 0) -> dict[str, Any] | None:
    """Up to ``count`` observations the run recorded (its latest checkpoint's replay), or None when it has none."""
    try:
        replay = load_buffer(latest_checkpoint(run_dir) / "replay.zarr")
    except (FileNotFoundError, ValueError):
        return None
    if len(replay) == 0:
        return None
    replay.rng = np.random.default_rng(seed)
    mix = {g: 1.0 for g in ("online", "prior")}
    return replay.sample(min(count, len(replay)), mix=mix)["obs"]


def export_run(run_dir: str | Path, fmt: str, out: str | Path, observations: int = 256) -> dict[str, Any]:
    """Exports a run's latest policy (see :func:`export_policy`), checked on ``observations`` of its own recorded
    observations (env resets when its checkpoint holds none)."""
    run_dir = Path(run_dir)
    cfg = load_yaml(TrainConfig, run_dir / "config.yaml")
    env = make_env(cfg.env)
    try:
        agent = build_agent(cfg, ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space))
        ckpt = latest_checkpoint(run_dir)
        agent.load_policy_state(load_file(str(ckpt / "policy.safetensors")))
        example = recorded_observations(run_dir, observations)
        if example is None:  # no replay saved: observations from env resets
            rows = [env.reset(seed=i)[0] for i in range(min(observations, 32))]
            example = _stack(rows)
        low, high = env_action_bounds(env)
        info = {"run": str(run_dir), "checkpoint": ckpt.name, "env_id": cfg.env.id, "agent": cfg.agent.name,
                "control_hz": trained_rate(cfg.runtime.control_hz, env), "action_low": low, "action_high": high}
        if agent.obs_spec.instruction_dim:  # a robot PC without robot_rl looks the embedding up by its text
            info["instructions"] = {t: v.astype(float).tolist() for t, v in instruction_table(cfg.env, env).items()}
        return export_policy(agent, fmt, out, example, info)
    finally:
        env.close()


def trained_rate(actor_hz: float, env: Any) -> float | None:
    """The control rate the policy was trained at: the actor's (``runtime.control_hz``) when it was paced, else the
    env's own step rate (a robot_rl sim's ``control_hz``, a gymnasium env's ``1 / dt``); None when unknown."""
    if actor_hz > 0:
        return float(actor_hz)
    base = env.unwrapped
    own = getattr(getattr(base, "cfg", None), "control_hz", None)
    if own:
        return float(own)
    dt = getattr(base, "dt", None)
    return 1.0 / float(dt) if dt else None


def _stack(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    first = rows[0]
    return {k: _stack([r[k] for r in rows]) if isinstance(v, Mapping) else np.stack([np.asarray(r[k]) for r in rows])
            for k, v in first.items()}
