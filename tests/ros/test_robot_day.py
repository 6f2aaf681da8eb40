"""A day on the robot as a person spends it (tests/ros/robot_day.py), small: for the ros2_control_joint_position
profile (a pick with the gripper) and ur5e_servo (no gripper: a reach), against the bare-driver rehearsal with a
scripted person on a ROS joystick. No success topic anywhere: the person labels demonstrations and frames, the
reward classifier judges training. The next morning's resume takes no random action and the arm moves only when
asked; benchmarks/robot_day.py runs the same day at full size."""

from __future__ import annotations

import pytest

from tests.ros.robot_day import DaySizes, RobotDay

pytestmark = pytest.mark.ros


@pytest.mark.timeout(900)
@pytest.mark.parametrize("profile", ["ros2_control_joint_position", "ur5e_servo"])
def test_a_day_on_the_robot(tmp_path, domain: int, profile: str) -> None:
    day = RobotDay(profile, tmp_path / "day", domain, DaySizes())
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
    log = (tmp_path / "day" / "arm_safety.log").read_text()
    assert "Traceback" not in log, log[-3000:]
