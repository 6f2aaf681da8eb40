"""Fine-tuning on the robot from the calibrated-sim policy, beside training there from scratch: the robot is the
emulated arm driver running a reality profile (``ros2_control_joint_position``, ``reality:=typical``) with the
safety node, each in its own process over ROS 2; ``robot-rl train`` drives it through the robot env at its own
pace (the actor never blocked mid-episode, the learner catching up between episodes).

    MUJOCO_GL=egl .venv/bin/python benchmarks/robot_finetune.py --base runs/pc_cal3_s0 [--reality typical]
        [--steps 2000] [--eval-every 500] [--episodes 20] [--scratch-steps 4000] [--demos ZARR ...]
        [--finetune-flags 'FLAGS'] [--out FILE]

A pixel base (its env has ``image_size``) runs on a robot with the front and wrist cameras as ROS image topics
and no object pose, as ``transfer_gap.py`` checks it; give it the base's own demos (recorded with frames).

``finetune`` starts from the base run's agent (``init_from``: networks, optimizers, temperature; no random
warm-up). ``scratch`` starts fresh (500 random steps, then SAC with the same settings). ``--demos``: prior data in
every batch of both (e.g. the sim demos the base run trained with); without any, fine-tuning from the sim policy
collapsed (60 % through ``typical`` at the start, 30 % after 500 robot steps, 5 % after 1,000). Every
``eval-every`` robot steps the run's policy (kept with ``keep_policies``) is evaluated afterwards through the same
robot, deterministic, on the same placements (each mark through a driver started for it: the driver's resets place
the cube in one sequence from its start): robot steps to >= 95 % is the figure (scratch stops at its first mark
there; every fine-tuning mark is evaluated, to show whether it keeps it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from common import Table, write_result  # noqa: E402
from ros_latency import policy_successes  # noqa: E402
from transfer_gap import camera_profile, fresh_robot, image_size  # noqa: E402

from tests.ros.graph import ros_env  # noqa: E402
from tests.ros.test_profiles import profile_file  # noqa: E402


def train_on_robot(name: str, base: str, profile: str, steps: int, every: int, folder: Path, domain: int,
                   init: bool, demos: list[str], flags: list[str] = ()) -> Path:
    """``robot-rl train`` through the robot env; returns the run folder. ``flags``: more ``robot-rl train`` flags
    (overriding the config written here)."""
    base_cfg = yaml.safe_load((Path(base) / "config.yaml").read_text())
    cfg = {"name": name, "runs_dir": str(folder), "progress": False, "seed": 0,
           "env": {"id": "robot_rl.envs.ros_env:robot_rl/RosArm-v0",
                   "kwargs": {"profile": profile, "reset_service": "arm_driver/reset", "connect_timeout": 60.0}},
           "total_env_steps": steps, "eval_every": 0, "eval_episodes": 1, "checkpoint_every": every,
           "checkpoint_every_s": 0.0, "keep_policies": True, "checkpoint_keep": 2, "log_every": 100,
           "runtime": {"num_actors": 1, "max_update_lag": 0, "catch_up_between_episodes": True},
           "demos": [str(Path(d).resolve()) for d in demos], "agent": base_cfg["agent"],
           "replay": base_cfg.get("replay", {})}  # the base's capacities (a pixel run's fit in RAM)
    if init:
        cfg.update(init_from=str(Path(base).resolve()), learning_starts=256)
    else:
        cfg.update(random_steps=500, learning_starts=500)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", str(path), *flags], env=ros_env(domain),
                          cwd=ROOT, capture_output=True, text=True, timeout=6 * steps + 600)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: train exited {done.returncode}: {done.stderr[-2000:]}")
    print(f"{name}: {steps} robot steps in {time.monotonic() - started:.0f} s", flush=True)
    return folder / name


def evaluate(run: Path, base: str, profile: str, episodes: int, stop_at: float | None, sim_kwargs: dict,
             start_robot: Callable[[], AbstractContextManager[None]], only: set[int] | None = None) -> list[dict]:
    """Each kept policy of ``run`` (in order of robot steps; the base's first, at 0) through the robot, each on a
    robot of its own (``start_robot()``: a context that starts one), so all meet the same placements; stops after
    the first at or above ``stop_at`` (None: every one, to see whether fine-tuning keeps what it reached).
    ``sim_kwargs``: the sim that sizes the agent (the base's observations: its cameras, no object state). ``only``:
    just the policies kept at these robot steps."""
    from robot_rl.envs.ros_env import RosArmEnv

    policies = sorted((run / "checkpoints" / "policies").glob("*.safetensors"), key=lambda p: int(p.stem))
    marks = [(0, None)] if base else []
    marks += [(int(p.stem), p) for p in policies]
    marks = [(steps, p) for steps, p in marks if only is None or steps in only]
    out = []
    for steps, policy in marks:
        with start_robot():
            env = RosArmEnv(profile=profile, reset_service="arm_driver/reset", connect_timeout=60.0, obs_timeout=1.0)
            try:
                ok = policy_successes(base if policy is None else str(run), episodes, env, sim_kwargs=sim_kwargs,
                                      policy_file=policy)
            finally:
                env.close()
        out.append({"robot_steps": steps, "success": float(ok.mean())})
        print(run.name, out[-1], flush=True)
        if stop_at is not None and ok.mean() >= stop_at:
            break
    return out


def first_at_95(evals: list[dict]) -> int | None:
    """The robot steps of the first mark at or above 95 % (None: none)."""
    return next((e["robot_steps"] for e in evals if e["success"] >= 0.95), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the calibrated-sim PickCube run (state, or pixels: its "
                        "robot then has the front and wrist cameras as ROS image topics and no object pose)")
    parser.add_argument("--reality", default="typical")
    parser.add_argument("--steps", type=int, default=2000, help="robot steps of fine-tuning (0: skip)")
    parser.add_argument("--scratch-steps", type=int, default=4000, help="robot steps from scratch (0: skip)")
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--demos", nargs="*", default=[], help="demo datasets (zarr) in every batch of both runs")
    parser.add_argument("--finetune-flags", default="", help="more robot-rl train flags for the fine-tuning run, "
                        "e.g. '--agent.critic-warmup-updates 500' or '--agent.actor-lr 3e-5'")
    parser.add_argument("--keep", default=None, help="the folder of the robot runs (default: a temporary one)")
    parser.add_argument("--reevaluate", default="", help="ARM:STEPS,...: no training; the policies --keep's ARM run "
                        "kept at those robot steps, evaluated again (e.g. on more --episodes)")
    parser.add_argument("--domain", type=int, default=213)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.reevaluate and not args.keep:
        parser.error("--reevaluate evaluates the runs of an earlier --keep folder: give it with --keep")
    os.environ.update(ros_env(args.domain))
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="robot_finetune_"))
    folder.mkdir(parents=True, exist_ok=True)
    size = image_size(args.base)
    path = camera_profile("ros2_control_joint_position", size, folder) if size else \
        profile_file("ros2_control_joint_position", folder)
    base_kwargs = yaml.safe_load((Path(args.base) / "config.yaml").read_text())["env"].get("kwargs") or {}
    sim_kwargs = {k: v for k, v in base_kwargs.items() if k != "randomization"}  # sizes the agent (as the base's)
    arms = [] if args.reevaluate else \
        ([("finetune", args.steps, True)] if args.steps else []) + \
        ([("scratch", args.scratch_steps, False)] if args.scratch_steps else [])
    result: dict = {"arms": {}}

    def robot() -> AbstractContextManager[None]:
        return fresh_robot(args.domain, folder, path, args.reality, size)

    for name, steps, init in arms:
        with robot():
            started = time.monotonic()
            run = train_on_robot(name, args.base, path, steps, args.eval_every, folder, args.domain, init, args.demos,
                                 shlex.split(args.finetune_flags) if init else [])
            wall = time.monotonic() - started
        evals = evaluate(run, args.base if init else "", path, args.episodes, None if init else 0.95, sim_kwargs,
                         robot)
        result["arms"][name] = {"steps": steps, "train_wall_s": round(wall), "evals": evals,
                                "robot_steps_to_95": first_at_95(evals)}
    if args.reevaluate:
        arm, _, marks = args.reevaluate.partition(":")
        only = {int(x) for x in marks.split(",")}
        evals = evaluate(folder / arm, "", path, args.episodes, None, sim_kwargs, robot, only)
        result["arms"][f"{arm}, evaluated again"] = {"steps": max(only), "train_wall_s": None, "evals": evals,
                                                     "robot_steps_to_95": first_at_95(evals)}
    result["setup"] = {"base": args.base, "image_size": size, "reality": args.reality, "episodes": args.episodes,
                       "eval_every": args.eval_every, "demos": args.demos, "finetune_flags": args.finetune_flags,
                       "reevaluate": args.reevaluate}
    print(json.dumps(result["arms"]))
    print(f"results: {write_result('robot_finetune', result, args.out, tables=tables(result))}")


def tables(result: dict) -> list[Table]:
    s = result["setup"]
    obs = f"pixels, {s['image_size']}-pixel cameras" if s.get("image_size") else "state"
    table = Table(f"PickCube ({obs}) on the `{s['reality']}` robot (the rehearsal): success of the run's policy, "
                  f"deterministic, the same {s['episodes']} placements, at each mark of robot steps",
                  ["run", "robot steps: success", "robot steps to >= 95 %", "training wall time"], echo=False)
    for name, arm in result["arms"].items():
        marks = ", ".join(f"{e['robot_steps']}: {100 * e['success']:.0f} %" for e in arm["evals"])
        reached = arm["robot_steps_to_95"]
        table.add(name, marks, "not within " + str(arm["steps"]) if reached is None else str(reached),
                  "-" if arm["train_wall_s"] is None else f"{arm['train_wall_s']} s for {arm['steps']} steps")
    return [table]


if __name__ == "__main__":
    main()
