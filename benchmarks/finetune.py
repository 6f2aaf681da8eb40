"""Fine-tuning a base (generalist) policy with off-policy RL: base success -> success after fine-tuning, env steps
to >= 90 %, the worst evaluation after the first 2k steps against the base, several seeds (IQM with a bootstrap
95 % CI).

    python benchmarks/finetune.py --base policies/vla_bench --task PickColor --methods residual \
        --seeds 0 1 2 --env-steps 10000 --eval-every 1000 --eval-episodes 50

Every run: the base (``--base``, a saved policy folder) executed synchronously by the actor, ``--demos`` scripted
demos in the prior partition (labelled with the base's proposals), ``--warmup`` steps of the base's own rollouts
before learning, actor and learner in lock-step in one process (the figures measure learning, not timing).
With ``--interventions``, the scripted human (the task's expert, teleop.device scripted) takes over when the
policy drifts, as an operator does in HIL-SERL; its steps count as env steps and their share is reported.
The base alone is evaluated on the same evaluation seeds (same placements and instructions) as each run.
Methods: ``residual`` (agent residual on the base), ``ibrl`` (agent ibrl: the base's action or an RL actor's,
whichever the critics value higher), ``critic`` (agent critic_guided: the base's weights fine-tuned,
``--execute-steps`` actions of each chunk executed), ``steer`` (SAC in the base's noise space through the
LatentSteering wrapper; no demos: they have no noise), ``rlpd`` (SAC with the RLPD recipe from scratch on the same
demos and cameras).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from common import write_result
from finetune_tables import summarise, tables

if TYPE_CHECKING:
    from robot_rl.training.config import TrainConfig

# what the small VLA's demos were recorded with, where the base's policy.json does not say
ENV_KWARGS = {"cameras": ["front", "wrist"], "image_size": 64, "object_state": False, "instruction": True}


def env_kwargs(args: argparse.Namespace) -> dict:
    """The env kwargs the base was trained on for ``args.task`` (its policy.json's task list), else ENV_KWARGS:
    a base trained with the object state in its observation is fine-tuned with it. ``--env-kwargs`` overrides."""
    from robot_rl.policies.vla_policy import read_policy_json

    if args.env_kwargs:
        return json.loads(args.env_kwargs)
    for task in read_policy_json(args.base).get("tasks", []):
        if task.get("env_id") == f"robot_rl/{args.task}-v0" and task.get("env_kwargs"):
            return dict(task["env_kwargs"])
    return dict(ENV_KWARGS)


ACTOR_TIMING = ("base_inference_ms", "base_missed_steps", "base_late_chunks", "jitter_p99_ms", "paused_s")
METHODS = ("residual", "ibrl", "served", "critic", "steer", "rlpd")


def method_config(method: str, args: argparse.Namespace) -> tuple[dict, int]:
    """The run's config sections for ``method`` and the control steps one of its env steps stands for.

    residual: a bounded residual on the base (agent residual); critic: critic-guided fine-tuning of the base's
    weights (agent critic_guided, executing ``--execute-steps`` of each chunk); steer: SAC in the base's noise space
    (the LatentSteering wrapper; one env step = one chunk, or its first ``--steer-execute-steps``); rlpd: SAC with
    the RLPD recipe from scratch on the same demos and cameras, no base."""
    # SAC as the bundled PickCube job runs it (a sparse reward): low initial temperature, no entropy backup
    sac = {"name": "sac", "utd": args.utd, "batch_size": args.batch_size, "init_temperature": 0.01,
           "backup_entropy": False}
    env = {"id": f"robot_rl/{args.task}-v0", "kwargs": env_kwargs(args)}
    if method == "residual":
        return {"env": env, "base_policy": {"path": args.base, "device": args.base_device},
                "agent": {"name": "residual", "utd": args.utd, "batch_size": args.batch_size,
                          "residual_scale": args.residual_scale, "residual_scales": args.residual_scales,
                          "critic_warmup_updates": args.critic_warmup,
                          "scale_anneal_updates": args.anneal,
                          **({} if args.residual_penalty is None else {"residual_penalty": args.residual_penalty}),
                          **({} if args.bc_weight is None else {"bc_weight": args.bc_weight})}}, 1
    if method == "ibrl":  # the base's action or an RL actor's full one, whichever the critics value higher
        residual, _ = method_config("residual", args)
        bounds = ("residual_scale", "residual_scales", "scale_anneal_updates")
        agent = {k: v for k, v in residual["agent"].items() if k not in bounds}
        return {**residual, "agent": {**agent, "name": "ibrl"}}, 1
    if method == "served":  # the residual run, its base behind the policy server, actor and learner as processes
        residual, _ = method_config("residual", args)
        return {**residual, "base_policy": {"path": args.base_url, "latency_s": args.served_latency},
                "execution": {"mode": args.served_mode},
                "runtime": {"processes": True, "control_hz": args.control_hz}}, 1
    if method == "critic":
        return {"env": env, "base_policy": {"path": args.base, "device": args.base_device},
                "execution": {"execute_steps": args.execute_steps},
                "agent": {"name": "critic_guided", "utd": args.utd, "batch_size": args.batch_size,
                          "critic_warmup_updates": args.critic_warmup, "base_lr": args.base_lr,
                          "improve_every": args.improve_every, "improve_batch": args.improve_batch,
                          "num_samples": args.num_samples, "use_cameras": args.critic_cameras}}, 1
    if method == "steer":
        from robot_rl.policies.vla_policy import read_policy_json

        chunk = int(read_policy_json(args.base)["config"]["chunk_length"])
        execute = min(args.steer_execute_steps or chunk, chunk)  # control steps one steering step stands for
        wrapper = {"target": "robot_rl.policies.steering:LatentSteering",
                   "kwargs": {"path": args.base, "noise_scale": args.steer_noise_scale, "execute_steps": execute}}
        # one env step is a decoded chunk here: --steer-utd updates per chunk (the residual's UTD counts per action)
        # SAC reads the state (the base reads the cameras) unless --steer-cameras
        agent = {**sac, "utd": args.steer_utd, "use_cameras": args.steer_cameras}
        return {"env": {**env, "wrappers": [wrapper]}, "agent": agent}, execute
    if method == "rlpd":  # no base to read the pixels: state-only unless --rlpd-cameras (SAC on pixels is slow here)
        kwargs = env["kwargs"] if args.rlpd_cameras else {**env["kwargs"], "image_size": 0}
        rlpd = {**sac, "bc_weight": 1.0 if args.bc_weight is None else args.bc_weight}  # + Q-filtered BC, as that job
        return {"env": {**env, "kwargs": kwargs}, "agent": rlpd}, 1
    raise ValueError(f"unknown method {method!r} (methods: {', '.join(METHODS)})")


def base_only(args: argparse.Namespace, seed: int, method: str) -> float:
    """The base's success on the evaluation episodes every run of ``seed`` is scored on (nan without a base)."""
    from robot_rl.envs.config import EnvConfig
    from robot_rl.envs.make import make_env
    from robot_rl.policies.config import BasePolicyConfig, ExecutionConfig
    from robot_rl.policies.evaluate import ExecutorAgent
    from robot_rl.policies.loader import load_policy
    from robot_rl.training.evaluation import evaluate
    from robot_rl.training.seeds import Seeds

    if not Path(args.base).exists() and not args.base.startswith("ws://"):
        return float("nan")
    env = make_env(EnvConfig(id=f"robot_rl/{args.task}-v0", kwargs=env_kwargs(args)))
    # the base executed as the method's runs execute it
    steps = {"critic": args.execute_steps, "steer": args.steer_execute_steps}.get(method, 0)
    agent = ExecutorAgent(load_policy(BasePolicyConfig(path=args.base)),
                          ExecutionConfig(mode="sync", execute_steps=steps), env)
    try:
        return float(evaluate(agent, env, args.eval_episodes, seed=Seeds(seed).evaluation())["success_rate"])
    finally:
        agent.close()
        env.close()


def run_one(args: argparse.Namespace, method: str, seed: int) -> dict:

    if method == "served":
        with served(args.base) as url:
            args.base_url = url
            return run_one_with(args, method, seed)
    return run_one_with(args, method, seed)


@contextlib.contextmanager
def served(policy: str) -> Iterator[str]:
    """``robot-rl serve-policy POLICY`` in a process of its own on a free local port; yields its URL."""
    from robot_rl.policies.client import wait_for_server

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "serve-policy", policy, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_server(f"ws://127.0.0.1:{port}", 120)
        yield f"ws://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)


def agent_overrides(pairs: list[str], agent: str) -> dict:
    """``--agent-set key=value ...`` as fields of the agent ``agent`` (values parsed as JSON where they parse): a
    field this agent lacks is left out (another method's agent has it); one that no agent has is an error."""
    import dataclasses

    from robot_rl.agents.registry import config_class, registered_names

    own = {f.name for f in dataclasses.fields(config_class(agent))}
    known = {f.name for name in registered_names() for f in dataclasses.fields(config_class(name))}
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in known:
            raise SystemExit(f"--agent-set takes key=value with a field of an agent, got {pair!r}")
        if key not in own:
            print(f"--agent-set {key}: agent {agent} has no such field, left out", flush=True)
            continue
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def metric_rows(run_dir: Path) -> list[dict]:
    """A run's logged rows (``metrics.jsonl``; none yet: empty)."""
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def train_config(args: argparse.Namespace, method: str, seed: int) -> tuple[TrainConfig, int]:
    """The run of ``method`` and ``seed`` as a TrainConfig, and the control steps one of its env steps stands for
    (the bundled fine-tuning configs, robot_rl/configs/finetune_*.yaml, are this for the recipes' commands: a test
    holds them equal)."""
    from robot_rl.config import from_dict
    from robot_rl.training.config import TrainConfig

    sections, per_step = method_config(method, args)
    agent = sections["agent"]  # the learner's device, a sweep's agent fields
    sections = {**sections, "agent": {**agent, "device": args.device, **agent_overrides(args.agent_set, agent["name"])}}
    # steering's env steps are chunks: its budget, warm-up and evaluation marks are divided by the actions executed
    # of each
    data = {"name": f"{method}-{seed}", "runs_dir": args.runs_dir, "seed": seed,
            "total_env_steps": args.env_steps // per_step, "random_steps": args.warmup // per_step,
            "learning_starts": args.warmup // per_step, "warmup_random_share": args.warmup_random_share,
            "eval_every": args.eval_every // per_step,
            "eval_episodes": args.eval_episodes, "checkpoint_every": args.checkpoint_every,
            "keep_policies": args.checkpoint_every > 0, "log_every": 500,
            "progress": False,
            "demos": [f"scripted:{args.demos}"] if args.demos and per_step == 1 else [],
            "runtime": {"processes": False}, **sections,
            "replay": {"online_capacity": args.env_steps * 11 // 10 + 2000, "demos_capacity": 200 * args.demos + 1000,
                       "interventions_capacity": args.env_steps + 100 if args.interventions else 100}}
    if args.interventions:
        data["teleop"] = {"device": "scripted"}
    return from_dict(TrainConfig, data), per_step


def run_one_with(args: argparse.Namespace, method: str, seed: int) -> dict:
    from robot_rl.runtime.supervisor import train

    cfg, per_step = train_config(args, method, seed)
    start = time.perf_counter()
    run_dir, final = train(cfg)
    rows = metric_rows(Path(run_dir))
    curve = [(int(r["step"]) * per_step, float(r["eval/success_rate"])) for r in rows if "eval/success_rate" in r]
    # a processes run's actor reports its base's timing (served: the latency at work) in the logged rows
    timing = {k.rsplit("/", 1)[1]: float(v) for r in rows for k, v in r.items()
              if k.startswith("actor/") and k.rsplit("/", 1)[1] in ACTOR_TIMING}
    # the share of the env steps the scripted human steered, per logged window (the actor logs a rate of 0 without
    # an operator too)
    human = [(int(r["step"]) * per_step, float(r["actor/intervention_rate"])) for r in rows
             if "actor/intervention_rate" in r] if args.interventions else []
    return {"curve": curve, "final": float(final["success_rate"]), "wall_s": time.perf_counter() - start,
            "base": base_only(args, seed, method), "actor": timing, **({"interventions": human} if human else {})}


def launch_children(args: argparse.Namespace) -> dict[tuple[str, int], dict]:
    """One child process per (method, seed), ``--parallel`` at a time (each with ``cores // parallel`` torch
    threads), seed by seed: every method's seed 0 first, so a partial benchmark is already side by side. A child's
    result and log are kept in the runs folder: rerunning with the same ``--runs-dir`` reuses the finished runs (a
    long benchmark resumes where it stopped); ``--finished-only`` launches nothing and reports those."""
    threads = max(1, (os.cpu_count() or 1) // args.parallel)
    env = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": str(threads)}
    folder = Path(args.runs_dir)
    results: dict[tuple[str, int], dict] = {}
    pending = [(m, s) for s in args.seeds for m in args.methods]
    running: dict[tuple[str, int], subprocess.Popen] = {}
    while pending or running:
        while pending and len(running) < args.parallel:
            job = pending.pop(0)
            done = folder / f"{job[0]}-{job[1]}.result.json"
            if done.exists():
                results[job] = json.loads(done.read_text())
                print(f"{job[0]} seed {job[1]}: reused {done}", flush=True)
                continue
            if args.finished_only:
                print(f"{job[0]} seed {job[1]}: not finished, left out", flush=True)
                continue
            shutil.rmtree(folder / f"{job[0]}-{job[1]}", ignore_errors=True)  # a killed attempt's run starts over
            with open(folder / f"{job[0]}-{job[1]}.log", "w") as log:
                running[job] = subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--runs-dir", args.runs_dir,
                                                 "--child", job[0], str(job[1])], stdout=log,
                                                stderr=subprocess.STDOUT, text=True, env=env)
        for job, proc in list(running.items()):
            if proc.poll() is None:
                continue
            del running[job]
            out = (folder / f"{job[0]}-{job[1]}.log").read_text()
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode or not lines:
                for other in running.values():
                    other.terminate()
                raise SystemExit(f"{job[0]} seed {job[1]} failed:\n{out[-3000:]}")
            run = results[job] = json.loads(lines[-1][7:])
            (folder / f"{job[0]}-{job[1]}.result.json").write_text(json.dumps(run))
            print(f"{job[0]} seed {job[1]}: base {run['base']:.2f} -> {run['final']:.2f} "
                  f"({run['wall_s'] / 60:.1f} min) curve {run['curve']}", flush=True)
        time.sleep(1.0)
    return results


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="policies/vla_bench",
                        help="the base policy (a folder or ws:// URL); 'none' for rlpd alone (give --env-kwargs)")
    parser.add_argument("--task", default="PickColor")
    parser.add_argument("--env-kwargs", default="", help="the env kwargs as JSON (default: the base's, see env_kwargs)")
    parser.add_argument("--methods", nargs="+", default=["residual"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=10_000)
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="save a checkpoint every this many env steps (0 = only at the end), each one's policy "
                             "weights kept (checkpoints/policies/), e.g. to evaluate the policy at earlier marks again")
    parser.add_argument("--warmup", type=int, default=1000, help="env steps of base rollouts before learning")
    parser.add_argument("--warmup-random-share", type=float, default=0.0,
                        help="share of the warm-up's steps with a uniform random action in place of the base's")
    parser.add_argument("--demos", type=int, default=20, help="scripted demos in the prior partition")
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--utd", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--residual-scale", type=float, default=0.3)
    parser.add_argument("--residual-scales", nargs="*", type=float, default=[],
                        help="residual: per-dimension bounds (e.g. 0.3 0.3 0.3 2.0: the gripper can cross over)")
    parser.add_argument("--residual-penalty", type=float, default=None,
                        help="residual: weight of its size penalty (default: the agent's)")
    parser.add_argument("--bc-weight", type=float, default=None,
                        help="BC weight of the residual (default: the agent's) and of rlpd (default 1)")
    parser.add_argument("--critic-warmup", type=int, default=500, help="updates before the residual acts")
    parser.add_argument("--anneal", type=int, default=1000, help="updates over which the bound grows in")
    parser.add_argument("--execute-steps", type=int, default=1, help="critic: actions executed per chunk")
    parser.add_argument("--base-lr", type=float, default=3e-5, help="critic: the base's learning rate")
    parser.add_argument("--improve-every", type=int, default=10, help="critic: updates per improvement step")
    parser.add_argument("--improve-batch", type=int, default=32, help="critic: observations per improvement")
    parser.add_argument("--num-samples", type=int, default=8, help="critic: chunks sampled per observation")
    parser.add_argument("--critic-cameras", action="store_true", help="critic: the critics encode the cameras")
    parser.add_argument("--served-latency", type=float, default=0.1, help="served: latency added per inference (s)")
    parser.add_argument("--served-mode", default="future", help="served: chunk execution (sync, async, future)")
    parser.add_argument("--control-hz", type=float, default=20.0, help="served: the actor's control rate")
    parser.add_argument("--steer-utd", type=int, default=20, help="steer: updates per chunk (one env step)")
    parser.add_argument("--steer-cameras", action="store_true", help="steer: SAC encodes the cameras too")
    parser.add_argument("--steer-noise-scale", type=float, default=1.5, help="steer: the noise an action of 1 is")
    parser.add_argument("--steer-execute-steps", type=int, default=0,
                        help="steer: actions of each decoded chunk executed (0: the whole chunk)")
    parser.add_argument("--rlpd-cameras", action="store_true", help="rlpd: SAC encodes the cameras too")
    parser.add_argument("--interventions", action="store_true",
                        help="the scripted human takes over when the policy drifts (teleop.device scripted)")
    parser.add_argument("--device", default="cpu", help="torch device of the learner (cuda: a GPU)")
    parser.add_argument("--base-device", default="cpu",
                        help="residual, critic: torch device of the base the actor runs (cuda: a GPU)")
    parser.add_argument("--agent-set", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="agent fields, for each method whose agent has them (e.g. residual_penalty=0.1 utd=8)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once, across methods and seeds (each with cores/parallel threads)")
    parser.add_argument("--runs-dir", default="")
    parser.add_argument("--out", default=None)
    parser.add_argument("--finished-only", action="store_true",
                        help="launch nothing: report the finished runs of --runs-dir (seeds may differ by method)")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "SEED"), help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if args.interventions and "steer" in args.methods:  # steering's actions are the base's noise, not commands
        parser.error("--interventions: the scripted human steers with commands; steer acts in the base's noise space")
    if args.base == "none" and (set(args.methods) != {"rlpd"} or not args.env_kwargs):
        parser.error("--base none: only --methods rlpd, with --env-kwargs (there is no base to read them from)")
    args.runs_dir = args.runs_dir or tempfile.mkdtemp(prefix="finetune_")
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    if args.child:
        print("RESULT " + json.dumps(run_one(args, args.child[0], int(args.child[1]))), flush=True)
        return
    runs = launch_children(args)
    done = {m: [s for s in args.seeds if (m, s) in runs] for m in args.methods}
    table = [summarise(m, [runs[(m, s)] for s in done[m]], done[m], args.eval_every) for m in args.methods if done[m]]
    print(f"\n{args.task}, {args.env_steps} env steps, {args.eval_episodes} evaluation episodes per point")
    print(f"{'method':<10} {'seeds':>5} {'base':>6} {'final IQM':>10} {'95 % CI':>12} {'steps to 90 %':>16} "
          f"{'worst drop':>11}")
    for row in table:
        to90 = ",".join("-" if s is None else str(s) for s in row["steps_to_90"])
        print(f"{row['method']:<10} {len(row['seeds']):>5} {row['base_mean']:>6.2f} {row['final_iqm']:>10.2f} "
              f"{row['final_ci'][0]:>5.2f}-{row['final_ci'][1]:<5.2f} {to90:>16} {min(row['worst_drop']):>+11.2f}")
    figures = {"task": args.task, "env_steps": args.env_steps, "seeds": args.seeds, "methods": table}
    path = write_result(f"finetune_{args.task.lower()}", figures, args.out, tables=tables(figures))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
