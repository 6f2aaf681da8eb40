"""Training by config through a robot profile: ``robot-rl train pickcube_ros`` against robot_rl's emulation of the
profile's driver (``arm_driver`` + ``arm_safety`` as their own processes, the actor reading joint states, TF and
the URDF like on a real robot), with the default job's 20 scripted PickCube demos, for twice the env steps pure sim
needs to reach 90 % (1,500 for the default job: docs/benchmarks/learning.md), then ``robot-rl eval RUN`` through
the same graph.

The demos are recorded on the robot (``--demos profile``, the default: the scripted expert acting from the
observation drives the emulated driver through the profile, as a person records demos on their robot) or in pure
sim (``--demos sim``: the default job's own dataset).

    MUJOCO_GL=egl .venv/bin/python benchmarks/profile_training.py [--profiles ur5e_servo ros2_control_joint_position]
        [--steps 3000] [--eval-episodes 20] [--demos profile|sim] [--seed 0] [--out RESULT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import Table, write_result  # noqa: E402

from tests.ros.experts import pickcube_expert  # noqa: E402
from tests.ros.graph import ros_env  # noqa: E402
from tests.ros.test_profiles import profile_file, running_profile  # noqa: E402

CLI = [sys.executable, "-m", "robot_rl.cli"]
PURE_SIM_STEPS_TO_90 = 1500
"""The default PickCube job in pure sim: env steps to >= 90 % eval success, each of 3 seeds (learning page)."""


ROS_ENV = "robot_rl.envs.ros_env:robot_rl/RosArm-v0"
DEMOS = 20


def sim_demos(seed: int) -> Path:
    """The default job's demos (20 scripted PickCube episodes, recorded in pure sim on first use)."""
    from robot_rl.datasets.record import ensure_demos

    return ensure_demos("robot_rl/PickCube-v0", DEMOS, seed=seed, root=ROOT / "demos")


class ObservationExpert:
    """A demo source for ``record_demos``: the PickCube expert acting from the observation alone (it sees what the
    robot env shows, not the sim), plus the default job's Gaussian action noise."""

    name, human = "observation_expert", False

    def __init__(self, seed: int) -> None:
        from robot_rl.datasets.sources import DEFAULT_NOISE

        self.noise, self.rng, self.obs = DEFAULT_NOISE, np.random.default_rng(seed), None

    def start(self, env: object) -> None:
        pass

    def reset(self) -> None:
        self.obs = None

    def observe(self, obs: dict, info: dict, first: bool) -> None:
        self.obs = obs

    def step(self, env):
        from robot_rl.datasets.sources import Step

        action = pickcube_expert(self.obs["state"], env.unwrapped.target_pos)
        action[:3] += self.rng.normal(0.0, self.noise, 3).astype(np.float32)
        return Step(np.clip(action, -1.0, 1.0))

    def close(self) -> None:
        pass


def profile_demos(kwargs: dict, seed: int, out: Path) -> Path:
    """The default job's 20 scripted demos, recorded on the emulated robot through the profile."""
    from robot_rl.datasets.record import record_demos

    record_demos(ROS_ENV, DEMOS, out, seed=seed, env_kwargs=kwargs, progress=False, device=ObservationExpert(seed))
    return out


def train_and_eval(profile: str, runs: Path, steps: int, episodes: int, seed: int, domain: int, log: Path,
                   demos_from: str) -> dict:
    kwargs = {"profile": profile, "reset_service": "arm_driver/reset", "connect_timeout": 60.0}
    name = Path(profile).stem
    env = ros_env(domain)
    t0 = time.monotonic()
    if demos_from == "sim":
        demos = sim_demos(seed)
    else:
        os.environ.update(env)
        demos = profile_demos(kwargs, seed, runs.parent / f"{name}.demos.zarr")
    demo_s = time.monotonic() - t0
    t0 = time.monotonic()
    with open(log, "ab") as out:
        train = subprocess.run([*CLI, "train", "pickcube_ros", "--env.kwargs", json.dumps(kwargs),
                                "--demos", str(demos), "--total-env-steps", str(steps), "--seed", str(seed),
                                "--name", name, "--runs-dir", str(runs), "--no-progress"],
                               stdout=out, stderr=subprocess.STDOUT, env=env, timeout=4 * 3600)
    train_s = time.monotonic() - t0
    if train.returncode != 0:
        return {"error": f"train exited {train.returncode}: {log.read_text()[-1500:]}"}
    run = runs / name
    checkpoints = run / "checkpoints"
    counters = json.loads((checkpoints / (checkpoints / "latest").read_text().strip() / "counters.json").read_text())
    evaluation = subprocess.run([*CLI, "eval", str(run), "--episodes", str(episodes)], capture_output=True,
                                text=True, env=env, timeout=3600)
    if evaluation.returncode != 0:
        return {"error": f"eval exited {evaluation.returncode}: {evaluation.stderr[-1500:]}"}
    text = evaluation.stdout
    result = json.loads(text[text.index("{"):])
    return {"env_steps": int(counters["env_steps"]), "updates": int(counters["updates"]), "train_s": round(train_s),
            "demo_s": round(demo_s), "demos": demos_from, "success": result["success_rate"], "episodes": episodes}


def tables(result: dict) -> list[Table]:
    s = result["setup"]
    table = Table(f"robot-rl train pickcube_ros through each profile's emulated driver, {s['steps']} env steps "
                  f"(pure sim: >= 90 % at {PURE_SIM_STEPS_TO_90}), then {s['eval_episodes']} deterministic eval "
                  "episodes through it", ["profile", "demos recorded", "env steps", "updates", "train wall time",
                                          "eval success", ">= 80 %"], echo=False)
    where = {"profile": "on the robot (through the profile)", "sim": "in pure sim"}
    for name, r in result["profiles"].items():
        if "error" in r:
            table.add(name, where[s.get("demos", "sim")], "-", "-", "-", "stopped: " + r["error"][:160], "no")
        else:
            table.add(name, where[r.get("demos", "sim")], r["env_steps"], r["updates"], f"{r['train_s'] / 60:.1f} min",
                      f"{100 * r['success']:.0f} %", "yes" if r["success"] >= 0.8 else "no")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", nargs="+", default=["ur5e_servo", "ros2_control_joint_position"])
    parser.add_argument("--steps", type=int, default=2 * PURE_SIM_STEPS_TO_90)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--demos", choices=["profile", "sim"], default="profile",
                        help="where the 20 scripted demos are recorded: on the emulated robot through the profile, or "
                             "in pure sim")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--domain", type=int, default=207)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="profile_training_"))
    print(f"logs and runs under {tmp}", flush=True)
    if args.demos == "sim":
        sim_demos(args.seed)
    result: dict = {"profiles": {}}
    for name in args.profiles:
        path = profile_file(name, tmp)
        with running_profile(args.domain, tmp, path):
            entry = train_and_eval(path, tmp / "runs", args.steps, args.eval_episodes, args.seed, args.domain,
                                   tmp / f"{name}.train.log", args.demos)
        result["profiles"][name] = entry
        print(name, json.dumps(entry), flush=True)
    result["setup"] = {"steps": args.steps, "eval_episodes": args.eval_episodes, "seed": args.seed, "demos": args.demos,
                       "pure_sim_steps_to_90": PURE_SIM_STEPS_TO_90}
    print(f"results: {write_result('profile_training', result, args.out, tables=tables(result))}")


if __name__ == "__main__":
    main()
