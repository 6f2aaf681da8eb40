"""Deterministic evaluation: success rate, return and cycle time with bootstrap CIs for one policy, the IQM with
a stratified bootstrap CI across runs (seeds), and videos of the episodes; for a run's agent (composed with its base
policy when it acts on one: :func:`evaluation_agent`) and for a base policy alone (:func:`evaluate_policy`,
:func:`evaluate_base_policy`)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from safetensors.torch import load_file

from robot_rl.agents.registry import capabilities, uses_base
from robot_rl.config import load_yaml
from robot_rl.datasets.record import resolve_env_id
from robot_rl.envs.config import EnvConfig
from robot_rl.envs.make import make_env
from robot_rl.policies.base import BasePolicy, misfit
from robot_rl.policies.config import ExecutionConfig
from robot_rl.policies.evaluate import ComposedAgent, ExecutorAgent
from robot_rl.policies.loader import load_policy
from robot_rl.spaces import ObsSpec, action_dim_of
from robot_rl.training.agents import build_agent
from robot_rl.training.config import TrainConfig
from robot_rl.training.env_stages import evaluation_stages
from robot_rl.training.stats import bootstrap_ci, iqm_ci
from robot_rl.utils.failpoint import failpoint
from robot_rl.utils.run_dir import policy_file
from robot_rl.utils.video import write_video
from robot_rl.view.config import ViewConfig
from robot_rl.view.live import OperatorView, ViewFrame, copy_cameras


def rollout(agent: Any, env: gym.Env, episodes: int, seed: int = 10_000,
            frames: list[np.ndarray] | None = None, view: OperatorView | None = None) -> dict[str, np.ndarray]:
    """Runs ``episodes`` deterministic episodes (episode i seeded ``seed + i``); per-episode ``returns``,
    ``lengths`` and ``successes`` (``info["is_success"]`` at the end, NaN when the env does not report it).
    With ``frames`` (a list; the env made with ``render_mode="rgb_array"``), appends every rendered frame; with
    ``view``, shows every step in the operator view (one recording per episode)."""
    returns, lengths, successes = [], [], []
    episodic = capabilities(type(agent)).episodic  # per-episode state (a base policy's executor)
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        if episodic:
            agent.begin_episode(info)
        done, ret, length = False, 0.0, 0
        if frames is not None:
            frames.append(env.render())
        if view is not None:
            view.begin_episode(f"episode_{i:05d}")
            began = time.monotonic()
        while not done:
            action = agent.act(obs, deterministic=True)
            obs, reward, terminated, truncated, info = env.step(action)
            ret += float(reward)
            length += 1
            done = terminated or truncated
            if frames is not None:
                frames.append(env.render())
            if view is not None:
                cameras = copy_cameras(obs) or ({"render": frames[-1]} if frames else {})
                view.frame(ViewFrame("policy", time.monotonic() - began, length - 1, cameras,
                                     policy_action=np.array(action, np.float32), reward=float(reward),
                                     success=bool(info.get("is_success", False)),
                                     progress={"episode": i, "successes": float(np.nansum(successes))}))
        returns.append(ret)
        lengths.append(length)
        successes.append(float(info["is_success"]) if "is_success" in info else np.nan)
        if view is not None:
            outcome = {1.0: "success", 0.0: "failure"}.get(successes[-1], "ended")
            view.end_episode(f"episode {i}: {outcome}, return {ret:.2f}, {length} steps")
        failpoint("evaluation.episode")
    return {"returns": np.array(returns), "lengths": np.array(lengths), "successes": np.array(successes)}


def summarize(returns: np.ndarray, lengths: np.ndarray, successes: np.ndarray) -> dict[str, float]:
    """Means with 95 % percentile-bootstrap intervals (``*_ci_low`` / ``*_ci_high``); cycle time is the mean
    length of successful episodes."""
    ok = ~np.isnan(successes) & (successes > 0)
    _, ret_lo, ret_hi = bootstrap_ci(returns)
    has_success = not np.all(np.isnan(successes))
    rate, rate_lo, rate_hi = bootstrap_ci(successes) if has_success else (float("nan"),) * 3
    cycle, cycle_lo, cycle_hi = bootstrap_ci(lengths[ok]) if ok.any() else (float("nan"),) * 3
    return {
        "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
        "return_ci_low": ret_lo, "return_ci_high": ret_hi,
        "success_rate": rate, "success_ci_low": rate_lo, "success_ci_high": rate_hi,
        "episode_length": float(np.mean(lengths)),
        "cycle_time": cycle, "cycle_time_ci_low": cycle_lo, "cycle_time_ci_high": cycle_hi,
    }


def evaluate(agent: Any, env: gym.Env, episodes: int, seed: int = 10_000) -> dict[str, float]:
    return summarize(**rollout(agent, env, episodes, seed))


def across_runs(per_run: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """IQM of returns (and of successes) over ``[runs, episodes]`` with a stratified bootstrap 95 % CI."""
    out: dict[str, float] = {"runs": float(len(per_run))}
    for key in ("returns", "successes"):
        scores = np.stack([r[key] for r in per_run])
        if np.all(np.isnan(scores)):
            continue
        out[f"{key}_iqm"], out[f"{key}_iqm_ci_low"], out[f"{key}_iqm_ci_high"] = iqm_ci(scores)
    return out


def load_run(run: str | Path, render_mode: str | None = None,
             policy: str = "latest") -> tuple[Any, gym.Env, Any, Any]:
    """A run folder's config, a fresh env of its task, its agent with its ``policy`` weights (``latest``: the newest
    checkpoint's; ``best``: its best evaluation's) and the actor that evaluates it (the agent itself, or the agent on
    its base policy: close it when it is not). A robot trained with a learned reward is judged by that reward
    classifier (a sim by its own success check)."""


    cfg = load_yaml(TrainConfig, Path(run) / "config.yaml")
    env = make_env(cfg.env, render_mode=render_mode, stages=evaluation_stages(cfg))
    agent = build_agent(cfg, ObsSpec.from_space(env.observation_space), action_dim_of(env.action_space))
    agent.load_policy_state(load_file(str(policy_file(run, policy))))
    return cfg, env, agent, evaluation_agent(cfg, agent, env)


def evaluate_runs(run_dirs: list[str | Path], episodes: int, video: str | Path | None = None,
                  seed: int = 10_000, view: ViewConfig | None = None, policy: str = "latest") -> dict[str, Any]:
    """Evaluates the ``policy`` (``latest`` or ``best``: :func:`load_run`) of each run, every run on the same
    episodes (episode i resets with ``seed + i``); with ``video``, writes the first run's episodes to it (several
    cameras side by side when the env renders more than one); with ``view`` enabled, shows the first run's episodes
    in the operator view (saved under ``<first run>/eval_view`` unless ``view.save_dir`` says otherwise)."""

    per_run, result = [], {}
    for i, run in enumerate(run_dirs):
        _, env, agent, actor = load_run(run, "rgb_array" if video and i == 0 else None, policy)
        frames: list[np.ndarray] | None = [] if video and i == 0 else None
        live = None
        if view is not None and view.enabled and i == 0:
            live = OperatorView(view, "robot_rl eval", Path(view.save_dir or Path(run) / "eval_view"))
        try:
            episodes_out = rollout(actor, env, episodes, seed, frames, live)
        finally:
            if live is not None:
                live.close()
        if actor is not agent:
            actor.close()
        if frames:
            write_video(frames, video, fps=env.metadata.get("render_fps", 20))
        env.close()
        per_run.append(episodes_out)
        result[str(run)] = summarize(**episodes_out)
    if len(per_run) > 1:
        result["across_runs"] = across_runs(per_run)
    return result


# ------------------------------------------------------------------ base policies
def evaluation_agent(cfg: Any, agent: Any, env: Any) -> Any:
    """What a run's evaluation acts with: the agent, composed with the run's base policy (executed
    synchronously, chunked as the run executes it: evaluation measures the policy, not the latency) when the
    agent acts on one."""
    if not uses_base(cfg.agent):
        return agent
    # an agent that fine-tunes the base's weights acts with its own, current base
    base = agent.base_policy() if capabilities(type(agent)).trains_base else load_policy(cfg.base_policy)
    # the run's chunking (execute_steps, ensembling) without its timing: evaluation measures the policy
    return ComposedAgent(agent, base, dataclasses.replace(cfg.execution, mode="sync"), env)


def evaluate_policy(policy: BasePolicy, env_id: str, env_kwargs: Mapping[str, Any], episodes: int,
                    execution: ExecutionConfig | None = None, seed: int = 10_000,
                    video: str | Path | None = None, instruction: str = "") -> dict[str, Any]:
    """Success, return and cycle time of ``policy`` on ``episodes`` episodes of one task (episode i seeded
    ``seed + i``), plus the executor's counts."""

    env = make_env(EnvConfig(id=env_id, kwargs=dict(env_kwargs), instruction=instruction),
                   render_mode="rgb_array" if video else None)
    spec = ObsSpec.from_space(env.observation_space)
    why = misfit(policy.metadata, spec.state_dim, spec.cameras, action_dim_of(env.action_space))
    if why:
        env.close()
        raise ValueError(f"policy {policy.metadata.name!r} {why} (env {env_id!r})")
    agent = ExecutorAgent(policy, execution or ExecutionConfig(mode="sync"), env)
    frames: list[np.ndarray] | None = [] if video else None
    try:
        out = rollout(agent, env, episodes, seed, frames)
        if frames:
            write_video(frames, video, fps=env.metadata.get("render_fps", 20))
    finally:
        agent.close()
        env.close()
    return {**summarize(**out), **{f"executor/{k}": v for k, v in agent.executor.stats().items()},
            "successes": out["successes"].tolist()}


def evaluate_base_policy(path: str, tasks: tuple[str, ...], env_kwargs: Mapping[str, Any], episodes: int,
                         base: Any, execution: ExecutionConfig, video_dir: str | None = None,
                         instruction: str = "") -> dict[str, Any]:
    """``robot-rl eval POLICY``: per task, the base policy's evaluation (the tasks it was trained on unless
    ``tasks`` names others)."""

    policy = load_policy(dataclasses.replace(base, path=path))
    trained = []
    if (Path(path) / "policy.json").is_file():
        trained = json.loads((Path(path) / "policy.json").read_text()).get("tasks", [])
    if tasks:
        known = {t["env_id"]: t["env_kwargs"] for t in trained}
        todo = [(resolve_env_id(t), dict(env_kwargs) or known.get(resolve_env_id(t), {})) for t in tasks]
    elif trained:
        todo = [(t["env_id"], dict(env_kwargs) or t["env_kwargs"]) for t in trained]
    else:
        raise ValueError("name the tasks to evaluate on (--tasks): this policy does not say what it was trained on")
    out: dict[str, Any] = {}
    try:
        for env_id, kwargs in todo:
            name = env_id.split("/")[-1]
            video = Path(video_dir) / f"{name}.mp4" if video_dir else None
            if video is not None:
                video.parent.mkdir(parents=True, exist_ok=True)
            result = evaluate_policy(policy, env_id, kwargs, episodes, execution, video=video,
                                     instruction=instruction)
            result.pop("successes")
            out[name] = result
    finally:
        policy.close()
    return out
