"""A reality profile makes the emulated driver behave as a real arm does, measured from outside over ROS 2: the same
driver without and with the bundled ``typical`` robot, each in its own process, the same joint step and gripper
command. With the profile, joint states and images arrive later by its latencies, the arm starts moving later
and tracks a step more slowly, the gripper closes no faster than its speed, and the images are warmer."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.ros

PROFILE = "ros2_control_joint_position"
STEP = 0.03
"""rad: the step joint 1 is commanded to make."""


def _profile_with_camera(tmp_path) -> str:
    from robot_rl.config import to_dict
    from robot_rl.robots.profile import load_profile, with_overrides

    camera = {"name": "wrist", "source": "ros", "topic": "/wrist_camera/color/image_raw"}
    path = tmp_path / f"{PROFILE}.yaml"
    path.write_text(yaml.safe_dump(to_dict(with_overrides(load_profile(PROFILE), {"cameras": [camera]}))))
    return str(path)


def _measure(profile: str) -> dict[str, float]:
    """Delays of joint states and images, the joint step's first motion and 63 % time, the gripper's fastest
    closing speed, from a probe node."""
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Float64MultiArray

    from robot_rl.robots.profile import load_profile
    from robot_rl.ros.link import RosLink

    names = load_profile(profile).joint_states.names
    link = RosLink("reality_probe")
    joints: list[tuple[float, float, float, float]] = []  # arrival, stamp, joint 1, gripper opening
    images: list[tuple[float, float]] = []
    lock = threading.Lock()

    def stamp_of(msg: object) -> float:
        return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec

    def on_joints(msg: JointState) -> None:
        if list(msg.name[:len(names)]) == list(names) and len(msg.position) >= len(names) + 2:
            with lock:
                joints.append((time.time(), stamp_of(msg), msg.position[0], msg.position[-1] + msg.position[-2]))

    colour: list[np.ndarray] = []  # the newest image's mean (R, G, B)

    def on_image(msg: Image) -> None:
        with lock:
            images.append((time.time(), stamp_of(msg)))
            colour[:] = [np.frombuffer(msg.data, np.uint8).reshape(msg.height, msg.width, 3).mean(axis=(0, 1))]
    node = link.node
    node.create_subscription(JointState, "/joint_states", on_joints, 50)
    node.create_subscription(Image, "/wrist_camera/color/image_raw", on_image, 10)
    arm = node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
    grip = node.create_publisher(Float64MultiArray, "/gripper_controller/commands", 10)
    try:
        deadline = time.monotonic() + 60
        while len(images) < 20 or arm.get_subscription_count() == 0 or grip.get_subscription_count() == 0:
            assert time.monotonic() < deadline, "the driver's joint states, images or command topics never came"
            time.sleep(0.1)
        with lock:
            q0 = joints[-1][2]
            start = len(joints)
        positions = _arm_positions(link, names)  # the whole arm where it is, joint 1 moved by STEP
        positions[0] += STEP
        arm.publish(Float64MultiArray(data=list(map(float, positions))))
        grip.publish(Float64MultiArray(data=[0.0, 0.0]))  # close
        sent = time.time()
        time.sleep(3.0)
        with lock:
            after = joints[start:]
            seen = list(joints), list(images)
        moved = [(s - sent, q - q0) for _, s, q, _ in after if s >= sent]
        first = next(t for t, dq in moved if abs(dq) > 0.002)
        t63 = next(t for t, dq in moved if dq > 0.63 * STEP)
        opening = np.array([(s, w) for _, s, _, w in after if s >= sent])
        window = 0.2  # joint noise (the profile's) over a short window would read as speed
        speeds = [abs(np.interp(t + window, opening[:, 0], opening[:, 1]) - np.interp(t, opening[:, 0], opening[:, 1]))
                  / window for t in opening[:, 0] if t + window <= opening[-1, 0]]
        all_joints, all_images = seen
        return {"state_delay": float(np.median([a - s for a, s, _, _ in all_joints[-200:]])),
                "image_delay": float(np.median([a - s for a, s in all_images[-20:]])),
                "first_motion": first, "t63": t63, "gripper_speed": float(max(speeds)),
                "closed": float(opening[-1, 1]), "red_over_blue": float(colour[0][0] / colour[0][2])}
    finally:
        link.close()


def _arm_positions(link: object, names: tuple[str, ...]) -> np.ndarray:
    """The arm's joint positions now (one joint state message)."""
    from sensor_msgs.msg import JointState

    got: list[np.ndarray] = []
    sub = link.node.create_subscription(
        JointState, "/joint_states",
        lambda m: got.append(np.asarray(m.position[:len(names)], np.float64)) if not got else None, 10)
    deadline = time.monotonic() + 10
    while not got:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    link.node.destroy_subscription(sub)
    return got[0]


@pytest.mark.timeout(240)
def test_a_typical_reality_profile_delays_softens_and_slows_the_driver(graph, tmp_path) -> None:
    from robot_rl_sim.reality import load_reality

    profile = _profile_with_camera(tmp_path)
    found = {}
    for reality in ("nominal", "typical"):
        graph.start("arm_driver", "-p", f"profile:={profile}", "-p", "image_size:=16", "-p", f"reality:={reality}")
        found[reality] = _measure(profile)
        codes = graph.stop()
        assert all(c in (0, -2) for c in codes.values()), codes
        graph.procs.clear()
    print(found)
    nominal, typical, r = found["nominal"], found["typical"], load_reality("typical")
    # latencies: what the profile adds, on top of what the same machine's delivery takes without it
    assert typical["state_delay"] - nominal["state_delay"] > 0.7 * r.state_latency, found
    assert typical["image_delay"] - nominal["image_delay"] > 0.7 * r.camera_latency, found
    assert typical["first_motion"] - nominal["first_motion"] > 0.5 * r.command_latency, found
    # tracking at half the bandwidth, against friction: the step takes longer
    assert typical["t63"] > 1.5 * nominal["t63"], found
    # the gripper closes at most at the profile's speed (the sim's own is several times faster)
    assert typical["gripper_speed"] < 1.3 * r.gripper_speed < nominal["gripper_speed"], found
    assert typical["closed"] < 0.01 and nominal["closed"] < 0.01, found  # both closed in the end
    # a warmer, brighter image: red gained 1 + x, blue 1 - x
    gain = (1 + r.brightness_change) / (1 - r.brightness_change)
    assert typical["red_over_blue"] / nominal["red_over_blue"] > 1 + 0.7 * (gain - 1), found


def _red_centre(image: np.ndarray) -> np.ndarray:
    """The mean pixel (column, row) of the cube's red in an RGB image."""
    red = (image[..., 0] > 120) & (image[..., 1] < 80) & (image[..., 2] < 80)
    rows, cols = np.nonzero(red)
    assert len(rows), "no red pixel: the cube is not in view"
    return np.array([cols.mean(), rows.mean()])


@pytest.mark.timeout(180)
def test_the_first_observation_after_a_reset_shows_the_scene_after_it(graph, tmp_path) -> None:
    """The camera's frames arrive 70 ms after their capture (``typical``), and the driver's reset moves the cube at
    once: the env's first observation still has frames of after the reset, the cube where it now lies (as a few
    periods later), not where the last episode left it."""
    from robot_rl.config import to_dict
    from robot_rl.envs.ros_env import RosArmEnv
    from robot_rl.robots.profile import load_profile, with_overrides
    from tests.ros.test_profiles import start_profile_graph, wait_kinematics

    camera = {"name": "front", "source": "ros", "topic": "/front_camera/color/image_raw", "resize": [32, 32]}
    path = tmp_path / f"{PROFILE}_front.yaml"
    profile = with_overrides(load_profile(f"rehearsal/{PROFILE}"), {"cameras": [camera]})
    path.write_text(yaml.safe_dump(to_dict(profile)))
    start_profile_graph(graph, str(path), "-p", "reality:=typical", "-p", "image_size:=32")
    wait_kinematics(graph)
    env = RosArmEnv(profile=str(path), reset_service="arm_driver/reset", connect_timeout=60.0)
    try:
        moves, errors = [], []
        last = None
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            first = _red_centre(obs["pixels"]["front"])
            for _ in range(4):  # held: the scene stays as the reset left it; these frames are surely of after it
                obs = env.step(env.hold_action())[0]
            settled = _red_centre(obs["pixels"]["front"])
            errors.append(float(np.linalg.norm(first - settled)))
            if last is not None:
                moves.append(float(np.linalg.norm(settled - last)))
            last = settled
    finally:
        env.close()
    assert min(moves) > 1.0, f"the resets did not move the cube in the image: {moves}"  # else nothing is shown
    assert max(errors) < 0.5, f"first observation's cube off where it lies, in pixels: {errors} (moves {moves})"


@pytest.mark.timeout(180)
def test_a_step_velocity_is_the_displacement_between_observations(graph, tmp_path) -> None:
    """``ee_velocity: step`` on the robot env reads what the sim's ``step`` reads: the EE's displacement since the
    previous observation over the time between their stamps (0 on the reset's first observation); at a steady
    command through the ``typical`` robot (its slower joint loop, its latencies) it settles at the target's speed.
    The observations are a control period apart, as the sim's steps are."""
    from robot_rl.envs.ros_env import RosArmEnv
    from tests.ros.test_profiles import profile_file, start_profile_graph, wait_kinematics

    path = profile_file(PROFILE, tmp_path)
    start_profile_graph(graph, path, "-p", "reality:=typical")
    wait_kinematics(graph)
    env = RosArmEnv(profile=path, reset_service="arm_driver/reset", connect_timeout=60.0, ee_velocity="step")
    try:
        obs, info = env.reset(seed=0)
        states, stamps = [obs["state"]], [info["stamp"]]
        for _ in range(8):  # +y at the full step: the target moves max_step per period
            obs, _, _, _, info = env.step(np.array([0.0, 1.0, 0.0, 1.0], np.float32))
            states.append(obs["state"])
            stamps.append(info["stamp"])
    finally:
        env.close()
    # observed at the joint states' instants, a period apart (TF at the driver's 50 Hz read them 40 and 60 ms apart)
    intervals = np.diff(stamps)[1:]
    assert np.sum(np.abs(intervals - env.period) < 0.006) >= 6, intervals
    pos, vel = np.array(states)[:, :3].astype(np.float64), np.array(states)[:, 7:10].astype(np.float64)
    assert np.all(vel[0] == 0.0), vel[0]
    expected = np.diff(pos, axis=0) / np.diff(stamps)[:, None]
    assert np.allclose(vel[1:], expected, atol=1e-3), (vel, expected)
    speed = env.cfg.limits.max_step * env.cfg.control_hz
    assert abs(vel[-3:, 1].mean() / speed - 1) < 0.15, (vel[:, 1], speed)
