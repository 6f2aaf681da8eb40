"""A day on the robot as a person spends it, against the bare-driver rehearsal: bring the robot up and check the
profile, record demonstrations by teleoperation (the person labels each attempt), record frames and train the reward
classifier, train with the classifier as reward while the person puts the scene back and takes over now and then,
stop for the night (Ctrl-C), and the next morning (the machine rebooted: shared memory gone; the driver restarted
with the arm where it was left) resume and evaluate. Every step is the ``robot-rl`` command a person types, in its
own process; the person is :class:`robot_rl_sim.rehearsal_person.RehearsalPerson` on a ROS joystick.

Used by tests/ros/test_robot_day.py (small sizes) and benchmarks/robot_day.py (full size, with its page).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml

from robot_rl.config import load_yaml
from robot_rl.replay.store import load_buffer
from robot_rl.runtime.checkpoint import latest_checkpoint
from robot_rl.training.config import TrainConfig
from tests.ros.bare import start_bare_driver
from tests.ros.graph import ROOT, Graph, ros_env
from tests.ros.test_profiles import wait_kinematics
from tests.runtime.delivery import clear_shm, random_actions, windows_after

TASKS = {"ros2_control_joint_position": "PickCube", "ur5e_servo": "Reach"}
"""The task of each profile's day (the UR has no gripper: a reach)."""
ENV_ID = "robot_rl.envs.ros_env:robot_rl/RosArm-v0"


@dataclass
class DaySizes:
    """How much of each step the day does (the test's are small; the benchmark's a person's real day)."""

    demos: int = 2
    """Demonstrations kept."""
    frames: int = 120
    """Frames recorded for the reward classifier."""
    classifier_epochs: int = 5
    """Epochs of the reward classifier."""
    random_steps: int = 20
    """Random actions asked for on day one (a robot's default is none)."""
    train_steps: int = 80
    """Env steps on day one before the person stops for the night."""
    resume_steps: int = 40
    """Env steps the next morning."""
    learning_starts: int = 40
    """Env steps before the first update."""
    max_episode_steps: int = 30
    """Control steps per episode (20 Hz)."""
    intervene_every: int = 3
    """The person takes over in every this many-th training episode (0: never)."""
    eval_episodes: int = 1
    """Evaluation episodes the next morning."""
    image_size: int = 32
    """The camera's side in pixels."""
    agent: dict = field(default_factory=lambda: {"hidden_dims": [64, 64], "num_critics": 2, "utd": 1,
                                                 "batch_size": 32, "encoder": {"latent_dim": 32}})
    """The agent's fields."""


@dataclass
class StepRecord:
    """One step of the day: how long it took and how much of it the person was busy."""

    name: str
    wall_s: float
    person_s: float
    result: dict


class RobotDay:
    """The day of one profile in ``folder`` on ROS domain ``domain`` (see the module docstring)."""

    def __init__(self, profile: str, folder: Path, domain: int, sizes: DaySizes | None = None) -> None:
        from robot_rl.robots.profile import load_profile

        self.base, self.folder, self.domain = profile, Path(folder), domain
        self.sizes = sizes or DaySizes()
        self.task = TASKS[profile]
        self.folder.mkdir(parents=True, exist_ok=True)
        self.guide = guide_blocks()
        self.profile = self.folder / "my_arm.yaml"  # the guide's profile, on this day's bundled profile and camera
        mine = {**self.guide["my_arm.yaml"], "extends": profile}
        mine["cameras"] = [{**cam, "resize": [self.sizes.image_size] * 2} for cam in mine["cameras"]]
        self.profile.write_text(yaml.safe_dump(mine))
        self.loaded = load_profile(str(self.profile))
        self.scene = self.folder / "scene"
        self.graph = Graph(domain, self.folder)
        self.person = None
        self.steps: list[StepRecord] = []
        self.procs: list[subprocess.Popen] = []  # every command started: none outlives the day (close)
        self.run = self.folder / "runs" / "day"
        (self.folder / "teleop.yaml").write_text("ros_topic: joy\ngripper_mode: hold\n")

    # ------------------------------------------------------------------ plumbing
    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "robot_rl.cli", *args], env=ros_env(self.domain), cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, name: str, *args: str) -> subprocess.Popen:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # a harness started in the background (`cmd &`):
            signal.signal(signal.SIGINT, signal.default_int_handler)  # the children would inherit ignoring Ctrl-C
        log = open(self.folder / f"{name}.log", "w")  # noqa: SIM115  (closed with the process)
        proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *args], env=ros_env(self.domain), cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()

    def _step(self, name: str, body: Callable[[], dict]) -> dict:
        busy0 = self.person.busy_s if self.person is not None else 0.0
        t0 = time.monotonic()
        result = body()
        busy = (self.person.busy_s if self.person is not None else 0.0) - busy0
        self.steps.append(StepRecord(name, round(time.monotonic() - t0, 1), round(busy, 1), result))
        return result

    def _wait(self, proc: subprocess.Popen, name: str, timeout: float) -> int:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"{name} did not end within {timeout} s: {self.log(name)[-3000:]}") from None

    def env_kwargs(self) -> str:
        return json.dumps({"profile": str(self.profile), "connect_timeout": 60.0})

    # ------------------------------------------------------------------ the robot
    def bring_up(self, start_joints: list[float] | None = None) -> dict:
        """The driver (bare) and robot_rl's safety node, then ``robot-rl robot check`` (every field, at once)."""
        from robot_rl_sim.rehearsal_person import RehearsalPerson

        extra = ("-p", f"start_joints:={start_joints}") if start_joints else ()
        start_bare_driver(self.graph, str(self.profile), self.scene, "-p", f"image_size:={self.sizes.image_size}",
                          *extra, task=self.task)
        self.graph.start("arm_safety", "-p", f"profile:={self.profile}")
        wait_kinematics(self.graph)
        if self.person is None:
            self.person = RehearsalPerson(self.scene, self.loaded.home_pos, self.loaded.limits.max_step)
        t0 = time.monotonic()
        check = self.cli("robot", "check", str(self.profile), timeout=120)
        assert check.returncode == 0, check.stderr[-3000:]
        return {"check_s": round(time.monotonic() - t0, 1)}

    def shut_down(self) -> list[float]:
        """The evening: the robot's processes stop; returns the arm's joints (where it stays overnight)."""
        joints = self.person.seen()["joints"]
        codes = self.graph.stop()
        assert all(c in (0, -2) for c in codes.values()), codes
        self.graph.procs.clear()
        return joints

    # ------------------------------------------------------------------ the steps
    def record_demos(self) -> dict:
        out = self.folder / "demos.zarr"

        def body() -> dict:
            proc = self.start("record_demos", "record-demos", ENV_ID, "--device", "ros", "--env-kwargs",
                              self.env_kwargs(), "-n", str(self.sizes.demos), "--teleop-config",
                              str(self.folder / "teleop.yaml"), "--out", str(out), "--no-progress")
            labels = []
            while proc.poll() is None and len(labels) < 3 * self.sizes.demos:
                if not self.person.wait_home_or_end(proc):
                    break
                self.person.put_back()
                labels.append(self.person.demonstrate(proc))
            assert self._wait(proc, "record_demos", 120) == 0, self.log("record_demos")[-3000:]
            return {"attempts": len(labels), "successes": int(sum(labels))}
        return self._step("record demonstrations", body)

    def record_frames(self) -> dict:
        out = self.folder / "frames.zarr"

        def body() -> dict:
            proc = self.start("record_frames", "record-frames", ENV_ID, "--mode", "keys", "--device", "ros",
                              "--env-kwargs", self.env_kwargs(), "--teleop-config", str(self.folder / "teleop.yaml"),
                              "--frames", str(self.sizes.frames), "--out", str(out), "--no-progress")
            attempts = 0
            while proc.poll() is None:
                if not self.person.wait_home_or_end(proc):
                    break
                self.person.put_back()
                attempts += 1
                self.person.show_success_frames(proc)
            assert self._wait(proc, "record_frames", 120) == 0, self.log("record_frames")[-3000:]
            return {"attempts": attempts}
        return self._step("record classifier frames", body)

    def train_classifier(self) -> dict:
        def body() -> dict:
            out = self.folder / "classifier"
            done = self.cli("train-reward", str(self.folder / "frames.zarr"), "--out", str(out), "--epochs",
                            str(self.sizes.classifier_epochs), "--no-progress", timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            metrics = json.loads((out / "classifier.json").read_text())["metrics"]
            return {"test_accuracy": metrics["test"]["accuracy"], "frames": metrics["test"]["frames"]}
        return self._step("train the reward classifier", body)

    def config(self) -> Path:
        """The guide's ``day.yaml`` with this day's files and sizes."""
        s = self.sizes
        cfg = self.guide["day.yaml"]
        cfg.update({
            "name": "day", "runs_dir": str(self.folder / "runs"), "progress": False,
            "env": {**cfg["env"], "kwargs": json.loads(self.env_kwargs()), "max_episode_steps": s.max_episode_steps},
            "demos": [str(self.folder / "demos.zarr")], "random_steps": s.random_steps,
            "learning_starts": s.learning_starts, "checkpoint_every": 0, "checkpoint_every_s": 30.0,
            "log_every": 20, "reward": {"path": str(self.folder / "classifier")}, "agent": s.agent})
        path = self.folder / "day.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def _train_until(self, proc: subprocess.Popen, name: str, steps: int) -> int:
        """The person keeps the scene and takes over now and then until the run has ``steps`` env steps."""
        episode, deadline = 0, time.monotonic() + 60.0 + 2.0 * steps  # 20 Hz, resets and the learner's catch-up
        while self._status().get("env_steps", 0) < steps:
            assert proc.poll() is None, self.log(name)[-3000:]
            assert time.monotonic() < deadline, self._stuck(name, episode)
            if not self.person.wait_home_or_end(proc, timeout=180):
                break
            self.person.put_back()
            episode += 1
            take_over = self.sizes.intervene_every and episode % self.sizes.intervene_every == 0
            self.person.watch_episode(proc, take_over)
        return episode

    def _stuck(self, name: str, episode: int) -> str:
        """What to know about a step that did not get on: the run, the robot's processes, the scene's age."""
        seen = self.person.seen()
        return (f"{name}: status {self._status()} after {episode} episodes; processes alive {self.graph.alive()}; "
                f"the scene is {time.time() - seen['t']:.1f} s old\n--- {name}\n{self.log(name)[-3000:]}\n"
                f"--- arm_driver\n{self.graph.log('arm_driver')[-1500:]}")

    def _status(self) -> dict:
        try:
            return json.loads((self.run / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def train_day_one(self) -> dict:
        def body() -> dict:
            proc = self.start("train", "train", str(self.config()))
            episodes = self._train_until(proc, "train", self.sizes.train_steps)
            proc.send_signal(signal.SIGINT)  # the evening: Ctrl-C
            code = self._wait(proc, "train", 300)
            assert code == 130, (code, self.log("train")[-3000:])
            status = self._status()
            return {"episodes": episodes, "env_steps": status["env_steps"], "updates": status["updates"],
                    "random_actions": random_actions(self.run), "interventions": intervened(self.run)}
        return self._step("train with interventions (day one)", body)

    def next_morning(self, joints: list[float]) -> dict:
        """Shared memory gone (a reboot), the arm where it was left, nudged by a hand overnight; the robot brought
        up again and the run resumed."""
        clear_shm(self.run)
        nudged = (np.asarray(joints) + np.r_[0.05, np.zeros(len(joints) - 1)]).tolist()
        self.bring_up(start_joints=nudged)
        before = random_actions(self.run)
        stopped = self._status()["env_steps"]

        def body() -> dict:
            proc = self.start("resume", "train", "--resume", str(self.run), "--total-env-steps",
                              str(stopped + self.sizes.resume_steps))
            self._train_until(proc, "resume", stopped + self.sizes.resume_steps)
            code = self._wait(proc, "resume", 600)
            assert code == 0, (code, self.log("resume")[-3000:])
            status = self._status()
            return {"env_steps": status["env_steps"], "updates": status["updates"],
                    "random_actions_after_resume": random_actions(self.run) - before,
                    "utd_windows": [v for _, v in windows_after(self.run, stopped)]}
        return self._step("resume the next morning", body)

    def evaluate(self) -> dict:
        def body() -> dict:
            proc = self.start("eval", "eval", str(self.run), "--episodes", str(self.sizes.eval_episodes))
            seen = []
            while proc.poll() is None and len(seen) < self.sizes.eval_episodes:
                if not self.person.wait_home_or_end(proc, timeout=120, still=False):  # an episode starts at once
                    break
                self.person.put_back()
                seen.append(self.person.watch_episode(proc, take_over=False))
            assert self._wait(proc, "eval", 300) == 0, self.log("eval")[-3000:]
            result = json.loads(self.log("eval")[self.log("eval").index("{"):])
            return {"classifier_success_rate": result["success_rate"], "seen_successes": int(sum(seen)),
                    "episodes": len(seen)}
        return self._step("evaluate", body)

    def close(self) -> None:
        """Everything the day started stops, also after a failed step (a train left running would load the
        machine for the tests after it)."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the command's session: its learner and actors too
                except ProcessLookupError:
                    pass
                proc.wait()
        if self.person is not None:
            self.person.close()
        self.graph.stop()

    def report(self) -> dict:
        return {"profile": self.base, "task": self.task, "sizes": asdict(self.sizes),
                "steps": [asdict(s) for s in self.steps]}


def guide_blocks() -> dict[str, dict]:
    """The YAML files of docs/guides/robot-day.md (a block whose first line names its file), parsed: the day runs
    what the page shows."""
    out = {}
    for block in re.findall(r"```yaml\n(.*?)```", (ROOT / "docs/guides/robot-day.md").read_text(), re.S):
        name = re.match(r"# (\S+\.yaml)", block)
        if name:
            out[name.group(1)] = yaml.safe_load(block)
    return out


def intervened(run: Path) -> int:
    """Transitions of the latest checkpoint the person chose (their takeovers)."""
    cfg = load_yaml(TrainConfig, run / "config.yaml")
    part = load_buffer(latest_checkpoint(run) / "replay.zarr", cfg.replay).partitions["interventions"]
    return int(np.count_nonzero(part.arrays["valid"][: part.size]))
