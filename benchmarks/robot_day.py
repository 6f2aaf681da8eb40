"""A day on the robot at full size, against the bare-driver rehearsal (tests/ros/robot_day.py): per profile, the
demonstrations a person records, the reward classifier's held-out accuracy, training with the classifier as reward
and the person's takeovers, the night's stop (Ctrl-C) and the next morning's resume (shared memory cleared, the
driver restarted where the arm was left), then an evaluation. Reported: every step's wall time and how long the
person's hands were busy, the classifier's accuracy, the success the person sees after training, the random actions
taken after the resume (must be 0) and the windowed update-to-data ratios after it.

    MUJOCO_GL=egl .venv/bin/python benchmarks/robot_day.py [--profiles ros2_control_joint_position ur5e_servo]
        [--demos 10] [--frames 800] [--train-steps 1200] [--resume-steps 300] [--eval-episodes 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import Table, write_result  # noqa: E402

from tests.ros.graph import new_domain, ros_env  # noqa: E402
from tests.ros.robot_day import TASKS, DaySizes, RobotDay  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", nargs="+", default=list(TASKS))
    parser.add_argument("--demos", type=int, default=10)
    parser.add_argument("--frames", type=int, default=800)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--random-steps", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=1200)
    parser.add_argument("--resume-steps", type=int, default=300)
    parser.add_argument("--learning-starts", type=int, default=200)
    parser.add_argument("--episode-steps", type=int, default=60)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--image-size", type=int, default=48)
    parser.add_argument("--folder", default="", help="where the days' files go (default: a temporary folder)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    sizes = DaySizes(demos=args.demos, frames=args.frames, classifier_epochs=args.epochs,
                     random_steps=args.random_steps, train_steps=args.train_steps, resume_steps=args.resume_steps,
                     learning_starts=args.learning_starts, max_episode_steps=args.episode_steps, intervene_every=4,
                     eval_episodes=args.eval_episodes, image_size=args.image_size,
                     agent={"hidden_dims": [256, 256], "num_critics": 2, "utd": 1, "batch_size": 128,
                            "init_temperature": 0.01, "backup_entropy": False, "bc_weight": 1.0,
                            "encoder": {"latent_dim": 64, "augment_pad": 4}})
    folder = Path(args.folder or tempfile.mkdtemp(prefix="robot_day_"))
    steps = Table("A day on the robot, step by step (bare-driver rehearsal, scripted person)",
                  ["profile", "step", "wall", "person busy", "result"])
    summary = Table("What the day gives", ["profile", "task", "demos kept / attempts", "classifier test accuracy",
                                           "success seen after training", "random actions after the resume",
                                           "UTD windows after the resume (target 1)", "a step that failed"])
    reports = []
    for profile in args.profiles:
        domain = new_domain()
        os.environ.update(ros_env(domain))
        day = RobotDay(profile, folder / profile, domain, sizes)
        done: dict = {}
        failed = ""
        try:
            day.bring_up()
            for key, step in (("demos", day.record_demos), ("frames", day.record_frames),
                              ("classifier", day.train_classifier), ("day_one", day.train_day_one)):
                done[key] = step()
            joints = day.shut_down()
            done["morning"] = day.next_morning(joints)
            done["evaluation"] = day.evaluate()
        except AssertionError as exc:  # reported in the table, with the robot's processes at that moment
            procs = {n: "alive" if p.poll() is None else f"exit {p.returncode}" for n, p in day.graph.procs.items()}
            failed = f"{str(exc).strip().splitlines()[-1][:200]} (robot processes: {procs})"
            print(f"{profile}: {exc}", file=sys.stderr)
        finally:
            day.close()
        report = {**day.report(), "failed": failed}
        reports.append(report)
        for s in report["steps"]:
            steps.add(profile, s["name"], f"{s['wall_s'] / 60:.1f} min", f"{s['person_s'] / 60:.1f} min",
                      ", ".join(f"{k} {v}" for k, v in s["result"].items() if k != "utd_windows"))
        demos, classifier = done.get("demos"), done.get("classifier")
        morning, evaluation = done.get("morning"), done.get("evaluation")
        windows = morning["utd_windows"] if morning else []
        summary.add(profile, day.task, f"{demos['successes']} / {demos['attempts']}" if demos else "-",
                    f"{classifier['test_accuracy']:.2f} ({classifier['frames']} frames)" if classifier else "-",
                    f"{evaluation['seen_successes']} / {evaluation['episodes']}" if evaluation else "-",
                    morning["random_actions_after_resume"] if morning else "-",
                    f"{min(windows):.2f}-{max(windows):.2f} ({len(windows)})" if windows else "none logged",
                    failed or "none")
    write_result("robot_day", {"days": reports}, args.out, tables=[summary, steps])


if __name__ == "__main__":
    main()
