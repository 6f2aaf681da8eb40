"""Robot-path soak: the bare-driver rehearsal (emulated driver in bare mode, robot_rl's safety node, ``robot-rl
train`` with its actor and learner, a person at a ROS joystick who puts the scene back and takes over now and then)
for an hour with a fault every few minutes, nobody at the keyboard.

    MUJOCO_GL=egl .venv/bin/python benchmarks/robot_soak.py [--minutes 60] [--fault-every 3 5]
        [--profile ros2_control_joint_position] [--demos 3] [--frames 200]
        [--folder runs/robot-soak-DATE] [--out RESULT.json] [--plot PNG]

The day starts as a person's does (tests/ros/robot_day.py): bring-up and ``robot-rl robot check``, demonstrations,
frames and the reward classifier; then training with the classifier as reward, and the faults, in turn:

* ``driver_restart``: the driver stops (SIGINT) and comes back 2 s later where the arm was;
* ``state_stall``: the driver's ``joint_states`` stop for 2 s or 5 s in turn (under and over the env's
  ``obs_timeout``), the arm where it is;
* ``participant_loss``: the safety node's process is SIGKILLed (its DDS participant vanishes without a goodbye)
  and started again;
* ``estop_reset``: the person presses the e-stop (the safety node's ``~/estop``) and resets it 5 s later;
* ``kill_learner``: the learner is SIGKILLed (the supervisor starts another);
* ``power_cut``: the training PC loses power (the whole ``robot-rl train`` process group SIGKILLed, its shared
  memory gone) and the person resumes it (``--resume``).

Checked and reported: every fault survived without a person at the keyboard (env steps grow again); no
transition lost or delivered twice (the final checkpoint's replay, tests/runtime/delivery.py); no unrequested
motion (the tool's motion, from the driver's own joint states through the URDF, while no policy command arrives or
the e-stop is latched: at most 1 mm once the arm has come to rest); no random actions after a resume and the
windowed update-to-data ratio after each fault; the resident memory of every process after warm-up; the success
the person sees, by quarter of the soak. Everything goes to ``--folder``; ``--out``/``--plot`` also write the
result and the memory plot elsewhere (the benchmark page's files).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import Table, write_result  # noqa: E402
from soak import (  # noqa: E402
    actor_pids,
    behaviour,
    learner_env_steps,
    learner_pid,
    memory_rows,
    memory_summary,
    plot_memory,
    run_roles,
)

from tests.ros.bare import start_bare_driver  # noqa: E402
from tests.ros.graph import new_domain, ros_env  # noqa: E402
from tests.runtime.delivery import clear_shm, delivery, kill_group, random_actions  # noqa: E402

FAULTS = ("driver_restart", "state_stall", "participant_loss", "estop_reset", "kill_learner", "power_cut")
UNREQUESTED_MM = 1.0
SETTLE_S = 1.5
"""After the last command (or the e-stop) the arm has this long to come to rest (a controlled stop from the
profile's top speed takes well under a second); motion after it is motion nobody asked for."""
RECOVER_S = 300.0
GROWTH = 20
"""Env steps (1 s at 20 Hz) that show training has gone on after a fault."""


class MotionLog:
    """The tool's position from the driver's joint states (through the URDF) and the arrival time of every policy
    command the safety node is sent (``policy/target_pose``), kept as arrays: an hour at the driver's rate."""

    def __init__(self, profile: object) -> None:
        from geometry_msgs.msg import PoseStamped

        from tests.ros.bare import ToolProbe

        self.probe = ToolProbe(profile)
        self.commands: list[float] = []
        self.probe.link.subscribe("commands", PoseStamped, "policy/target_pose",
                                  lambda _: self.commands.append(time.monotonic()), fast=True)

    def call(self, service: str) -> None:
        from std_srvs.srv import Trigger

        response = self.probe.link.call(Trigger, service, timeout=10.0)
        assert response.success, (service, response.message)

    def unrequested(self, estops: list[tuple[float, float]], start: float) -> dict:
        """:func:`unrequested_motion` of everything recorded since ``start``."""
        with self.probe._lock:
            samples = list(self.probe.samples)
        return unrequested_motion(np.array([s[0] for s in samples]), np.array([s[1] for s in samples]),
                                  [c for c in self.commands if c >= start], estops, start)

    def close(self) -> None:
        self.probe.close()


def unrequested_motion(t: np.ndarray, pos: np.ndarray, commands: list[float], estops: list[tuple[float, float]],
                       start: float) -> dict:
    """The peak tool motion (``pos [n, 3]`` m at times ``t``) in every stretch after ``start`` with no policy command
    for over ``SETTLE_S`` s and in every latched e-stop, each measured from where the tool was ``SETTLE_S`` s into
    it: {windows, seconds, peak_mm, worst, over_limit}."""
    bounds = np.concatenate([[start], np.sort(commands), [t[-1]]])
    windows = [(a + SETTLE_S, b, "no command") for a, b in zip(bounds[:-1], bounds[1:]) if b - a > SETTLE_S + 0.3]
    windows += [(a + SETTLE_S, b, "e-stop latched") for a, b in estops if b - a > SETTLE_S + 0.3]
    peaks = []
    for a, b, why in windows:
        inside = (t >= a) & (t <= b)
        if np.count_nonzero(inside) < 5:
            continue
        p = pos[inside]
        peaks.append((float(np.max(np.linalg.norm(p - p[0], axis=1))) * 1e3, a, b, why))
    worst = max(peaks, default=(0.0, 0, 0, ""))
    return {"windows": len(peaks), "seconds": round(sum(b - a for _, a, b, _ in peaks)),
            "peak_mm": round(worst[0], 3), "worst": {"at_s": round(worst[1] - start), "why": worst[3],
                                                     "seconds": round(worst[2] - worst[1], 1)},
            "over_limit": sum(p > UNREQUESTED_MM for p, *_ in peaks)}


class RobotSoak:
    """The day's robot (a :class:`tests.ros.robot_day.RobotDay`) trained for a long time with faults."""

    def __init__(self, day: object, total_steps: int) -> None:
        self.day, self.total_steps = day, total_steps
        self.run = day.run
        self.t0 = time.monotonic()
        self.lives = 0
        self.proc: subprocess.Popen | None = None
        self.driver, self.safety = "arm_driver", "arm_safety"
        self.memory: list[tuple[float, str, float]] = []
        self.episodes: list[tuple[float, bool, bool]] = []  # (s since start, success seen, person took over)
        self.estops: list[tuple[float, float]] = []
        self.stalls = (2.0, 5.0)  # s: one under the env's obs_timeout (3 s), one over
        self.faults: list[dict] = []
        self._stop = threading.Event()
        self.motion = MotionLog(day.loaded)
        self.person = threading.Thread(target=self._person, name="person", daemon=True)

    # ------------------------------------------------------------- processes
    def start(self, resume: bool) -> None:
        name = f"train_{self.lives}"
        self.lives += 1
        if resume:
            self.proc = self.day.start(name, "train", "--resume", str(self.run))
        else:
            self.proc = self.day.start(name, "train", str(self.day.config()), "--total-env-steps",
                                       str(self.total_steps))

    def learner(self) -> int | None:
        return learner_pid(self.run)

    def actors(self) -> list[int]:
        return actor_pids(self.run)

    def env_steps(self) -> int:
        return learner_env_steps(self.run)

    def sample(self) -> None:
        """Resident memory of every process (by role), at most every 15 s, also to ``memory.jsonl``."""
        now = time.monotonic() - self.t0
        if self.memory and now - self.memory[-1][0] < 15.0:
            return
        roles = run_roles(self.run, self.proc)
        for key, role in ((self.driver, "driver"), (self.safety, "safety node")):
            proc = self.day.graph.procs.get(key)
            if proc is not None and proc.poll() is None:
                roles[proc.pid] = role
        with open(self.day.folder / "memory.jsonl", "a") as f:
            for role, mb in memory_rows(self.run, roles):
                self.memory.append((now, role, mb))
                f.write(json.dumps([round(now, 1), role, round(mb, 1)]) + "\n")

    def _person(self) -> None:
        """Between episodes the person puts the scene back; every few episodes they take over for a stretch."""
        person, every = self.day.person, self.day.sizes.intervene_every
        while not self._stop.is_set():
            proc = self.proc
            if proc is None or proc.poll() is not None:
                time.sleep(0.5)
                continue
            try:
                if not person.wait_home_or_end(proc, timeout=30):
                    continue
                person.put_back()
                take_over = bool(every) and len(self.episodes) % every == every - 1
                success = person.watch_episode(proc, take_over)
            except (OSError, TimeoutError) as exc:  # the scene unreadable a moment (a driver restarting)
                print(f"person: {exc}", flush=True)
                time.sleep(1.0)
                continue
            self.episodes.append((time.monotonic() - self.t0, success, take_over))

    def recovered(self, began: float, steps: int, not_pid: int | None = None) -> float | None:
        """Seconds from ``began`` until training goes on: a learner (not ``not_pid``) counts ``GROWTH`` env steps
        more than both ``steps`` (before the fault) and its count 3 s after the fault (what the spools still held
        then is not the robot moving again)."""
        time.sleep(3.0)
        base = max(steps, self.env_steps())
        while time.monotonic() - began < RECOVER_S:
            pid = self.learner()
            if pid and pid != not_pid and self.env_steps() >= base + GROWTH:
                return round(time.monotonic() - began, 1)
            if self.proc.poll() is not None:
                return None
            self.sample()
            time.sleep(0.5)
        return None

    # ----------------------------------------------------------------- faults
    def inject(self, kind: str) -> dict:
        graph, day = self.day.graph, self.day
        began = time.monotonic()
        entry = {"kind": kind, "at_s": round(time.monotonic() - self.t0), "env_steps": self.env_steps()}
        steps, learner = entry["env_steps"], None
        if kind == "driver_restart":
            stopped = graph.procs.pop(self.driver)
            stopped.send_signal(signal.SIGINT)
            entry["driver_exit"] = stopped.wait(timeout=30)
            joints = day.person.seen()["joints"]  # where the stopped driver left the arm (its last scene)
            time.sleep(2.0)
            self.driver = f"arm_driver_{len(self.faults)}"
            start_bare_driver(graph, str(day.profile), day.scene, "-p", f"image_size:={day.sizes.image_size}",
                              "-p", f"start_joints:={list(joints)}", task=day.task, name=self.driver)
        elif kind == "state_stall":  # ridden out (shorter than obs_timeout), or an actor that reconnects
            entry["seconds"] = self.stalls[len([f for f in self.faults if f["kind"] == kind]) % 2]
            day.person.scene.ask("pause_state", seconds=entry["seconds"])
        elif kind == "participant_loss":
            killed = graph.procs.pop(self.safety)
            killed.send_signal(signal.SIGKILL)
            killed.wait()
            time.sleep(1.0)
            self.safety = f"arm_safety_{len(self.faults)}"
            graph.start("arm_safety", "-p", f"profile:={day.profile}", name=self.safety)
        elif kind == "estop_reset":
            pressed = time.monotonic()
            self.motion.call("/arm_safety/estop")
            time.sleep(5.0)
            self.motion.call("/arm_safety/reset_estop")
            self.estops.append((pressed, time.monotonic()))
        elif kind == "kill_learner":
            learner = self.learner()
            if learner is None:
                entry["skipped"] = "no learner at the moment"
            else:
                os.kill(learner, signal.SIGKILL)
        elif kind == "power_cut":
            kill_group(self.proc)
            clear_shm(self.run)
            time.sleep(2.0)
            self.start(resume=True)
        entry["recovered_s"] = self.recovered(began, steps, not_pid=learner)
        entry["survived"] = entry["recovered_s"] is not None
        print(json.dumps(entry), flush=True)
        with open(day.folder / "faults.jsonl", "a") as f:
            f.write(json.dumps(entry) + "\n")
        self.faults.append(entry)
        return entry

    def stop(self) -> int:
        """The evening's Ctrl-C: a final checkpoint, exit 130."""
        self._stop.set()
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=600)
        self.person.join(timeout=60)
        return code


def success_by_quarter(episodes: list[tuple[float, bool, bool]], seconds: float) -> list[dict]:
    """Success the person saw in the episodes they did not take over, per quarter of the soak."""
    out = []
    for q in range(4):
        own = [s for t, s, took in episodes if q * seconds / 4 <= t < (q + 1) * seconds / 4 and not took]
        out.append({"episodes": len(own), "successes": int(sum(own)),
                    "rate": round(sum(own) / len(own), 3) if own else None})
    return out


def main() -> None:
    from tests.ros.robot_day import TASKS, DaySizes, RobotDay

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--fault-every", nargs=2, type=float, default=(3.0, 5.0), metavar=("MIN", "MAX"),
                        help="minutes between faults, drawn uniformly")
    parser.add_argument("--faults", nargs="+", default=list(FAULTS), choices=FAULTS,
                        help="the kinds, injected in turn (shuffled each round)")
    parser.add_argument("--profile", default="ros2_control_joint_position", choices=list(TASKS))
    parser.add_argument("--demos", type=int, default=3, help="demonstrations the person records first")
    parser.add_argument("--frames", type=int, default=200, help="frames for the reward classifier")
    parser.add_argument("--warmup-minutes", type=float, default=10.0, help="memory growth is measured after this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folder", default=None, help="where everything goes (default: runs/robot-soak-<date>-<time>)")
    parser.add_argument("--plot", default=None, help="also write the memory plot here")
    parser.add_argument("--out", default=None, help="also write the result here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = Path(args.folder or f"runs/robot-soak-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if folder.exists() and any(folder.iterdir()):
        parser.error(f"--folder {folder} is not empty")
    domain = new_domain()
    os.environ.update(ros_env(domain))
    sizes = DaySizes(demos=args.demos, frames=args.frames, classifier_epochs=10, random_steps=100, learning_starts=200,
                     max_episode_steps=40, intervene_every=4)
    day = RobotDay(args.profile, folder, domain, sizes)
    print(f"folder {folder}", flush=True)
    soak = None
    try:
        setup = {"bring_up": day.bring_up(), "demos": day.record_demos(), "frames": day.record_frames(),
                 "classifier": day.train_classifier()}
        print(json.dumps(setup), flush=True)
        soak = RobotSoak(day, total_steps=100_000_000)
        soak.start(resume=False)
        soak.person.start()
        start = soak.t0
        end = start + args.minutes * 60
        kinds: list[str] = []
        next_fault = time.monotonic() + rng.uniform(*args.fault_every) * 60
        unplanned = 0
        while time.monotonic() < end:
            soak.sample()
            if soak.proc.poll() is not None:  # ended without a planned fault: what a person would have to do
                unplanned += 1
                print(f"train exited by itself ({soak.proc.returncode}); resuming", flush=True)
                soak.start(resume=True)
            if time.monotonic() >= next_fault:
                if not kinds:
                    kinds = rng.sample(args.faults, len(args.faults))
                soak.inject(kinds.pop())
                next_fault = time.monotonic() + rng.uniform(*args.fault_every) * 60
            time.sleep(1.0)
        seconds = time.monotonic() - start
        final_code = soak.stop()
        motion = soak.motion.unrequested(soak.estops, start)
        delivered = delivery(day.run)
        acted = behaviour(day.run, soak.faults, sizes.random_steps, float(sizes.agent["utd"]))
        acted["random_actions_total"] = random_actions(day.run)
        logs = {"safety_node_holds": sum(day.graph.log(k).count("holding the measured pose")
                                         for k in day.graph.procs if k.startswith("arm_safety")),
                "tracebacks": [p.name for p in day.folder.glob("*.log") if "Traceback" in p.read_text()]}
    finally:
        if soak is not None:
            soak._stop.set()
            if soak.proc is not None and soak.proc.poll() is None:
                kill_group(soak.proc)
            soak.motion.close()
        day.close()
    for plot in {folder / "robot_soak_memory.png", *([Path(args.plot)] if args.plot else [])}:
        plot_memory(soak.memory, soak.faults, plot, roles=("learner", "actor", "supervisor", "replay", "driver",
                                                            "safety node"))
    by_kind = {k: {"injected": sum(f["kind"] == k for f in soak.faults),
                   "survived": sum(f["kind"] == k and f["survived"] for f in soak.faults)} for k in args.faults}
    result = {"minutes": args.minutes, "profile": args.profile, "task": day.task, "setup": setup,
              "faults": soak.faults, "by_kind": by_kind, "unplanned_exits": unplanned, "final_exit_code": final_code,
              "delivery": delivered, "behaviour": acted, "unrequested_motion": motion, "logs": logs,
              "success_by_quarter": success_by_quarter(soak.episodes, seconds), "episodes": len(soak.episodes),
              "memory": memory_summary(soak.memory, args.warmup_minutes * 60, roles=ROLES),
              "memory_samples": soak.memory, "fault_every_min": list(args.fault_every), "seed": args.seed}
    for out in {folder / "robot_soak.json", *([Path(args.out)] if args.out else [])}:
        write_result("robot_soak", result, out, tables=tables(result))


ROLES = ("learner", "learner less replay", "actor", "supervisor", "driver", "safety node")


def tables(result: dict) -> list[Table]:
    faults = Table(f"Faults over {result['minutes']:.0f} minutes on the robot path ({result['profile']}, "
                   f"{result['task']}), one every {result['fault_every_min'][0]:g}-{result['fault_every_min'][1]:g} "
                   "min", ["fault", "injected", "survived without a person", "back to training in"], echo=False)
    for kind, n in result["by_kind"].items():
        took = [f["recovered_s"] for f in result["faults"] if f["kind"] == kind and f["recovered_s"] is not None]
        faults.add(kind, n["injected"], n["survived"], f"{min(took):.0f}-{max(took):.0f} s" if took else "-")
    d, b, m = result["delivery"], result["behaviour"], result["unrequested_motion"]
    outcome = Table("Outcome", ["quantity", "figure"], echo=False)
    outcome.add("transitions in the replay (final checkpoint)", d["transitions"])
    outcome.add("delivered twice", d["duplicated"])
    outcome.add("missing inside an episode", d["missing"])
    outcome.add("learner's count = replay's count", d["counted_env_steps"] == d["transitions"])
    outcome.add("runs that ended without a planned fault", result["unplanned_exits"])
    outcome.add(f"unrequested tool motion: peak over {m['windows']} stretches ({m['seconds']} s) with no command "
                "or the e-stop latched", f"{m['peak_mm']:.2f} mm ({m['over_limit']} over {UNREQUESTED_MM:g} mm)")
    outcome.add("random actions after the warm-up (every resume)", b["random_actions_after_warmup"])
    ok = sum(f["utd_ok"] for f in b["after_faults"])
    outcome.add(f"faults followed by UTD windows within 25 % of {b['utd_target']:g}",
                f"{ok} of {len(b['after_faults'])}")
    for role, mem in result["memory"].items():
        outcome.add(f"{role} resident memory after warm-up -> end (max)",
                    f"{mem['after_warmup_mb']:.0f} -> {mem['end_mb']:.0f} MiB ({mem['growth_pct']:+.1f} %, max "
                    f"{mem['max_mb']:.0f})")
    quarters = result["success_by_quarter"]
    outcome.add("success the person saw, by quarter (the policy's own episodes)",
                " / ".join(f"{q['successes']}/{q['episodes']}" for q in quarters))
    outcome.add("logs with a traceback", ", ".join(result["logs"]["tracebacks"]) or "none")
    return [faults, outcome]


if __name__ == "__main__":
    main()
