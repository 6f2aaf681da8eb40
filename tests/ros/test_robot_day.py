"""A day on the robot as a person spends it (tests/ros/robot_day.py), small: for the ros2_control_joint_position
profile (a pick with the gripper) and ur5e_servo (no gripper: a reach), against the bare-driver rehearsal with a
scripted person on a ROS joystick. No success topic anywhere: the person labels demonstrations and frames, the
reward classifier judges training. The next morning's resume takes no random action and the arm moves only when
asked; benchmarks/robot_day.py runs the same day at full size."""

from __future__ import annotations

import pytest

from tests.ros.robot_day import DaySizes, RobotDay

pytestmark = pytest.mark.ros


def test_the_person_presses_the_buttons_robot_rl_maps() -> None:
    from robot_rl.teleop.gamepad import DEFAULT_BUTTONS
    from robot_rl_sim.rehearsal_person import BUTTON

    assert BUTTON == {function: int(b[1:]) for b, function in DEFAULT_BUTTONS.items()}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("profile", ["ros2_control_joint_position", "ur5e_servo"])
def test_a_day_on_the_robot(tmp_path, domain: int, profile: str) -> None:
    # the reach's classifier at 32 pixels learns nothing from 120 frames (three episodes, one per split: it says
    # success for every frame, so every episode ends at its first step, about 2.2 s of homing and the guide's
    # countdown each); from 300 frames in 20 epochs it tells them apart (held out: balanced accuracy 0.66), and day
    # one takes 50 s instead of 108. One demonstration: a reach is short
    sizes = (DaySizes(demos=1, frames=300, classifier_epochs=20, train_steps=35, resume_steps=15,
                      learning_starts=15)
             if profile == "ur5e_servo" else DaySizes())
    day = RobotDay(profile, tmp_path / "day", domain, sizes)
    try:
        day.bring_up()
        demos = day.record_demos()
        assert demos["successes"] >= day.sizes.demos, demos
        day.record_frames()
        classifier = day.train_classifier()
        assert classifier["frames"] > 0, classifier
        one = day.train_day_one()
        assert one["random_actions"] == day.sizes.random_steps, one  # what was asked for, taken on day one
        assert one["interventions"] > 0, one  # the person's takeovers went to the interventions partition
        joints = day.shut_down()
        morning = day.next_morning(joints)
        assert morning["random_actions_after_resume"] == 0, morning
        evaluation = day.evaluate()
        assert evaluation["episodes"] == day.sizes.eval_episodes, evaluation
    finally:
        day.close()
        print(day.report())
    for name in ("arm_safety", "train", "resume"):  # Ctrl-C at night, a driver restarted: no crash anywhere
        log = (tmp_path / "day" / f"{name}.log").read_text()
        assert "Traceback" not in log, (name, log[-3000:])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("source", ["key", "teleop"])
def test_success_from_a_person_trains_through_a_profile(tmp_path, domain: int, source: str) -> None:
    """``success: key`` (Enter on the terminal of robot-rl train) and ``success: teleop`` (the joystick's success
    button) each end episodes as successes in a training run through a profile, against the bare driver."""
    import json
    import subprocess
    import sys
    import time

    import numpy as np
    import yaml

    from robot_rl.config import load_yaml
    from robot_rl.replay.store import load_buffer
    from robot_rl.runtime.checkpoint import latest_checkpoint
    from robot_rl.training.config import TrainConfig
    from robot_rl_sim.rehearsal_person import RehearsalPerson
    from tests.ros.bare import start_bare_driver
    from tests.ros.graph import ROOT, Graph, ros_env
    from tests.ros.robot_day import ENV_ID
    from tests.ros.test_profiles import wait_kinematics

    profile = tmp_path / "my_arm.yaml"
    profile.write_text(f"extends: ros2_control_joint_position\nsuccess: {{source: {source}}}\n")
    graph = Graph(domain, tmp_path)
    start_bare_driver(graph, str(profile), tmp_path / "scene", task="PickCube")
    graph.start("arm_safety", "-p", f"profile:={profile}")
    person = None
    try:
        wait_kinematics(graph)
        cfg = {"name": "run", "runs_dir": str(tmp_path / "runs"), "progress": False, "total_env_steps": 80,
               "learning_starts": 20, "eval_every": 0, "checkpoint_every": 0, "log_every": 20,
               "env": {"id": ENV_ID, "kwargs": {"profile": str(profile), "connect_timeout": 60.0},
                       "max_episode_steps": 30},
               "runtime": {"max_update_lag": 0},
               "agent": {"hidden_dims": [32, 32], "num_critics": 2, "utd": 1, "batch_size": 16}}
        if source == "teleop":
            cfg["teleop"] = {"device": "ros", "ros_topic": "joy", "start": "now"}
            person = RehearsalPerson(tmp_path / "scene", (0.5295, 0.0, 0.2793))
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
        train = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "train", str(tmp_path / "run.yaml")],
                                 env=ros_env(domain), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        status = tmp_path / "runs" / "run" / "status.json"
        deadline = time.monotonic() + 240
        while train.poll() is None and time.monotonic() < deadline:
            time.sleep(1.0)  # often: a press during a reset (the arm going home) labels nothing
            if not status.is_file():
                continue  # the person labels once the run is going
            if person is not None:
                person.press("success")
            elif train.poll() is None:
                try:
                    train.stdin.write("\n")
                    train.stdin.flush()
                except BrokenPipeError:  # it ended meanwhile: its output says why
                    break
        out, _ = train.communicate(timeout=60)
        assert train.returncode == 0, out[-3000:]
    finally:
        if person is not None:
            person.close()
        graph.stop()
    run = tmp_path / "runs" / "run"
    cfg_run = load_yaml(TrainConfig, run / "config.yaml")
    online = load_buffer(latest_checkpoint(run) / "replay.zarr", cfg_run.replay).partitions["online"]
    rewarded = online.arrays["reward"][: online.size][online.arrays["valid"][: online.size]]
    assert np.count_nonzero(rewarded > 0) >= 1, "no episode ended as a success"
    if source == "teleop":
        assert json.loads((run / "status.json").read_text())["labelled_success"] >= 1
