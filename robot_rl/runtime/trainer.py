"""The one training loop for every task: collect with the policy, store, update at the configured UTD.

This is the in-process form of the actor/learner pair (``robot-rl train`` grows a process split on top of the
same pieces): ``_act_and_store`` is the actor's step, ``_learn`` the learner's.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from robot_rl.agents.sac import SACAgent
from robot_rl.config import save_yaml
from robot_rl.envs.make import make_env
from robot_rl.replay.buffer import ReplayBuffer
from robot_rl.runtime.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from robot_rl.runtime.config import TrainConfig
from robot_rl.runtime.evaluation import evaluate
from robot_rl.runtime.run_logger import RunLogger
from robot_rl.spaces import ObsSpec, action_dim_of


class Trainer:
    def __init__(self, cfg: TrainConfig, resume_dir: str | Path | None = None) -> None:
        cfg.validate()
        self.cfg = cfg
        self.env = make_env(cfg.env)
        self.eval_env = make_env(cfg.env)
        self.spec = ObsSpec.from_space(self.env.observation_space)
        self.action_dim = action_dim_of(self.env.action_space)
        cfg.agent.seed, cfg.replay.seed = cfg.seed, cfg.seed
        self.agent = SACAgent(self.spec, self.action_dim, cfg.agent)
        self.rng = np.random.default_rng(cfg.seed)
        self.counters: dict[str, Any] = {"env_steps": 0, "episodes": 0, "updates": 0}
        if resume_dir is not None:
            self.run_dir = Path(resume_dir)
            replay, counters = load_checkpoint(latest_checkpoint(self.run_dir), self.agent, cfg.replay,
                                               self.spec, self.action_dim)
            self.replay = replay or ReplayBuffer(self.spec, self.action_dim, cfg.replay)
            self.rng.bit_generator.state = counters.pop("rng")
            self.counters = counters
        else:
            name = cfg.name or f"{cfg.env.id.replace('/', '_')}-{datetime.now():%Y%m%d-%H%M%S}"
            self.run_dir = Path(cfg.runs_dir) / name
            if (self.run_dir / "checkpoints").exists():
                raise FileExistsError(f"{self.run_dir} already holds a run; use --resume {self.run_dir} or "
                                      "another name")
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.replay = ReplayBuffer(self.spec, self.action_dim, cfg.replay)
            for path in cfg.demos:
                self.replay.add_dataset(path, "demos")
        save_yaml(cfg, self.run_dir / "config.yaml")
        self.logger = RunLogger(self.run_dir)

    # ------------------------------------------------------------------ loop
    def run(self) -> dict[str, float]:
        cfg, c = self.cfg, self.counters
        obs, _ = self.env.reset(seed=cfg.seed + c["episodes"])
        episode_return, episode_step = 0.0, 0
        recent_returns: list[float] = []
        last_eval: dict[str, float] = {}
        t_log, steps_log, updates_log = time.perf_counter(), c["env_steps"], c["updates"]
        with self._progress() as progress:
            task = progress.add_task("train", total=cfg.total_env_steps, completed=c["env_steps"], info="")
            while c["env_steps"] < cfg.total_env_steps:
                obs, done, reward = self._act_and_store(obs, episode_step)
                episode_return += reward
                episode_step += 1
                if done:
                    recent_returns.append(episode_return)
                    self.logger.log({"train/episode_return": episode_return, "train/episode_length": episode_step},
                                    c["env_steps"])
                    c["episodes"] += 1
                    obs, _ = self.env.reset(seed=cfg.seed + c["episodes"])
                    episode_return, episode_step = 0.0, 0
                metrics = self._learn() if c["env_steps"] >= cfg.learning_starts else {}
                step = c["env_steps"]
                if cfg.log_every and step % cfg.log_every == 0 and metrics:
                    now = time.perf_counter()
                    metrics["perf/env_steps_per_s"] = (step - steps_log) / (now - t_log)
                    metrics["perf/updates_per_s"] = (c["updates"] - updates_log) * cfg.agent.utd / (now - t_log)
                    t_log, steps_log, updates_log = now, step, c["updates"]
                    self.logger.log({f"train/{k}" if "/" not in k else k: v for k, v in metrics.items()}, step)
                if cfg.eval_every and step % cfg.eval_every == 0:
                    last_eval = self._evaluate()
                if cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
                    self._checkpoint()
                info = f"ep return {np.mean(recent_returns[-10:]):.1f}" if recent_returns else ""
                if last_eval:
                    info += f" | eval {last_eval['return_mean']:.1f}"
                progress.update(task, completed=step, info=info)
        if not cfg.eval_every or c["env_steps"] % cfg.eval_every:
            last_eval = self._evaluate()
        self._checkpoint()
        self.logger.close()
        (self.run_dir / "final_eval.json").write_text(json.dumps(last_eval, indent=2))
        return last_eval

    def _act_and_store(self, obs: dict, episode_step: int) -> tuple[dict, bool, float]:
        c = self.counters
        if c["env_steps"] < self.cfg.random_steps:
            action = self.rng.uniform(-1, 1, self.action_dim).astype(np.float32)
        else:
            action = self.agent.act(obs)
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        self.replay.add(obs, action, float(reward), bool(terminated), bool(truncated), next_obs,
                        policy_version=c["updates"], episode_id=c["episodes"], step=episode_step)
        c["env_steps"] += 1
        return next_obs, bool(terminated or truncated), float(reward)

    def _learn(self) -> dict[str, float]:
        batch = self.replay.sample(self.cfg.agent.batch_size, utd=self.cfg.agent.utd, reuse_output=True)
        metrics = self.agent.update(batch)
        self.counters["updates"] += 1
        return metrics

    def _evaluate(self) -> dict[str, float]:
        result = evaluate(self.agent, self.eval_env, self.cfg.eval_episodes, seed=10_000 + self.cfg.seed)
        self.logger.log({f"eval/{k}": v for k, v in result.items()}, self.counters["env_steps"])
        self.logger.plot()
        return result

    def _checkpoint(self) -> None:
        counters = {**self.counters, "rng": self.rng.bit_generator.state}
        save_checkpoint(self.run_dir, self.agent, self.replay, counters)

    def _progress(self) -> Progress:
        return Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), TimeRemainingColumn(),
                        TextColumn("{task.fields[info]}"), disable=not self.cfg.progress)
