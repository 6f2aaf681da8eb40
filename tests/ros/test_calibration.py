"""Calibration recovers the robot from its log: the emulated driver runs the bundled ``typical`` reality profile
(hidden from calibration) in its own process; ``robot-rl record-excitation`` moves the arm and records a bag over
ROS 2; ``robot-rl calibrate`` reads only the bag and must find each of the profile's values (latencies within a
control period, the rest within 15 %; the camera's offset, rotation, lens and colour from its frames of the arm
held at a few poses), and a sim that follows the robot five times more closely than the nominal one."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.ros

CLI = [sys.executable, "-m", "robot_rl.cli"]


def image_shift(bag: str, profile, camera: dict) -> tuple[float, float]:
    """Pixels (at 128) by which the fitted camera, and the described one, see the scene off where the hidden
    ``typical`` camera sees it (the arm's links, hand and fingers and a 5 cm grid on the table, those in its image),
    the worst over the bag's held frames."""
    import mujoco

    from robot_rl.calibration.camera import candidate_pose, held_frames, project
    from robot_rl.calibration.log import read_bag, read_images
    from robot_rl.robots.profile import load_profile
    from robot_rl_sim import arm_tasks
    from robot_rl_sim.camera_error import true_fovy, true_pose
    from robot_rl_sim.reality import load_reality

    reality, arm = load_reality("typical"), load_profile(str(profile), "arm")
    frames = held_frames(read_images(bag, arm.cameras[0].topic), read_bag(bag, arm), 12)
    env = arm_tasks.PickCubeEnv(image_size=0)
    env.reset(seed=0)
    m, d, cid = env.model, env.data, env.model.camera(camera["camera"]).id
    fovy, links = float(m.cam_fovy[cid]), [m.body(f"link{k}").id for k in range(8)] + [
        m.body(n).id for n in ("hand", "finger_left", "finger_right")]
    table = np.array([[x, y, 0.0] for x in np.arange(-0.2, 1.1, 0.05) for y in np.arange(-0.6, 0.61, 0.05)])
    fitted = np.r_[camera["position"], camera["rotation"], camera["focal_error"]]
    worst = [0.0, 0.0]
    for frame in frames:
        d.qpos[env.arm_qpos] = frame.q
        mujoco.mj_forward(m, d)
        xpos, xmat = d.cam_xpos[cid].copy(), d.cam_xmat[cid].reshape(3, 3).copy()
        pos, mat = true_pose(xpos, xmat, reality)
        points = np.r_[d.xpos[links], table]
        seen = project(points, pos, mat, true_fovy(fovy, reality.camera_focal_error), 128)
        ahead = (points - pos) @ mat[:, 2] < -0.02  # in front of the lens (MuJoCo's cameras look along -z)
        shown = ahead & np.all((seen >= 0) & (seen < 128), axis=1)  # and in the image
        for k, (at_pos, at_mat, lens) in enumerate([(*candidate_pose(xpos, xmat, fitted), fitted[6]),
                                                     (xpos, xmat, 0.0)]):
            at = project(points, at_pos, at_mat, true_fovy(fovy, lens), 128)
            worst[k] = max(worst[k], float(np.abs(at - seen)[shown].max()))
    return worst[0], worst[1]


@pytest.mark.timeout(480)
def test_calibration_finds_a_hidden_reality_profile_from_40_s_of_log(graph, tmp_path) -> None:
    from robot_rl.calibration.excite import ExcitationConfig, record_excitation
    from robot_rl_sim.reality import load_reality

    # the bundled arm with a camera on its wrist, as HIL-SERL's arms have, whose joint efforts are its motors' torques
    # (as the rehearsal driver publishes them)
    profile = tmp_path / "arm.yaml"
    profile.write_text(yaml.safe_dump({"extends": "ros2_control_joint_position", "cameras": [
        {"name": "wrist", "source": "ros", "topic": "/wrist_camera/color/image_raw"}],
        "joint_states": {"effort": "motor_torque"}}))
    graph.start("arm_driver", "-p", f"profile:={profile}", "-p", "reality:=typical", "-p", "image_size:=128")
    bag = record_excitation(ExcitationConfig(profile=str(profile), out=str(tmp_path / "log"), seconds=42.0))["bag"]
    codes = graph.stop()
    assert all(c in (0, -2) for c in codes.values()), codes
    out = tmp_path / "calibration"
    done = subprocess.run([*CLI, "calibrate", "--bag", bag, "--profile", str(profile), "--out", str(out),
                           # friction read off the efforts, CMA-ES fits latency and bandwidth only: a smaller search
                           # (5 x 8 replays, 8 polish iterations, again from +-1 ms only) gives the same result as
                           # the default's on a CI run's log, in 100 replays instead of 192
                           "--fit.fit-seconds", "40", "--fit.iterations", "5", "--fit.population", "8",
                           "--fit.polish-iterations", "8", "--fit.latency-restarts", "1"],
                          capture_output=True, text=True,
                          timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((out / "calibration.json").read_text())
    truth = load_reality("typical")
    print({k: found[k] for k in ("command_latency", "state_latency", "tracking_bandwidth_scale",
                                 "joint_coulomb_friction", "joint_viscous_friction", "gripper_speed",
                                 "joint_noise", "rms_before_rad", "rms_after_rad", "camera_latency",
                                 "camera_position_error", "camera_rotation_error", "camera_focal_error",
                                 "brightness_change")})
    # latencies well within a 20 Hz control period: the state latency is read off the log (DDS delivery adds about a
    # millisecond), the command latency is fitted (DDS delivery and the driver's step add one or two)
    assert abs(found["command_latency"] - truth.command_latency) < 0.01, found
    assert abs(found["state_latency"] - truth.state_latency) < 0.005, found
    # read off the log (gripper speed, noise, dry and viscous friction from the efforts) and fitted (the joint loop's
    # bandwidth)
    assert found["friction_from"] == "efforts", found
    for key in ("gripper_speed", "joint_noise", "tracking_bandwidth_scale", "joint_coulomb_friction",
                "joint_viscous_friction", "camera_rotation_error", "brightness_change"):
        assert abs(found[key] / getattr(truth, key) - 1) <= 0.15, (key, found)
    # the camera from its frames: its latency off their stamps (DDS and the recorder add a few ms)
    assert abs(found["camera_latency"] - truth.camera_latency) < 0.01, found
    # the calibrated sim follows the robot: the median error over the moving samples (a stutter in DDS delivery that
    # brings the driver a burst of commands jolts the arm 0.1 rad for 0.1 s, which its log cannot show: the RMS of
    # one such log fell 3.3 times, its median 31 times)
    assert found["median_after_rad"] < found["median_before_rad"] / 5, found
    camera = found["cameras"][0]
    assert camera["frames"] == 12 and camera["rms_after"] < camera["rms_before"] / 10, camera
    # and where it is: its lens and offset within 15 %, and the fitted camera sees the scene where the hidden one
    # does, within a quarter pixel at every pose (described: 3.1 px; fitted 0.07 px; with 80 + 80 generations
    # instead of the default 80 + 150, 0.2 px)
    found_camera = camera["reality"]
    print("wrist camera", found_camera)
    assert abs(found_camera["camera_focal_error"] / truth.camera_focal_error - 1) <= 0.15, camera
    assert abs(found_camera["camera_position_error"] / truth.camera_position_error - 1) <= 0.15, camera
    # in the right directions: the offset along the optical diagonal, the rotation a pan
    assert np.dot(camera["position"], [1, -1, -1]) / np.sqrt(3) > 0.8 * truth.camera_position_error, camera
    assert abs(camera["rotation"][1]) > 0.8 * truth.camera_rotation_error, camera
    shift, described = image_shift(bag, profile, camera)
    print("the scene in the image, px off the hidden camera's: fitted", shift, "described", described)
    assert shift < 0.25 and described > 2.0, (shift, described, camera)
    # what it wrote: a reality profile the driver loads, env kwargs around the fit, a report with its picture
    fitted = load_reality(str(out / "reality.yaml"))
    assert fitted.tracking_bandwidth_scale == found["tracking_bandwidth_scale"]
    kwargs = json.loads((out / "env_kwargs.json").read_text())["randomization"]
    low, high = kwargs["stiffness_scale"]
    assert 0.3 < low < high < 0.8, kwargs  # a joint loop at half speed: a sim arm slower, not four times slower
    slow, fast = kwargs["gripper_speed"]  # the robot's gripper is slower than the sim's: trained around its speed
    assert slow < found["gripper_speed"] < fast, kwargs
    assert len(kwargs["camera_offsets"]["wrist"]) == 7, kwargs  # the training sim's camera where the robot's is
    # frames 70 ms old beside a state 10 ms old, at 20 Hz: 1.2 steps, the frame 1 step older than the state
    assert kwargs["image_latency_steps"] == 1 and kwargs["image_latency_jitter"] == 0, kwargs
    assert (out / "joints.png").stat().st_size > 10_000 and "calibrated" in (out / "report.md").read_text()
    assert yaml.safe_load((out / "reality.yaml").read_text())["sources"]


@pytest.mark.timeout(180)
def test_a_probe_response_through_the_typical_robot_fits_a_stiff_delayed_sim_arm(graph, tmp_path) -> None:
    """``robot-rl record-response`` through the robot env and the safety node, the driver running ``typical``:
    the training sim that moves as that robot does is stiffer than the nominal one, one control step behind."""
    from robot_rl.calibration.response import ResponseConfig, fit_response, read_response, record_response
    from tests.ros.test_profiles import profile_file, start_profile_graph, wait_kinematics

    profile = profile_file("ros2_control_joint_position", tmp_path)
    start_profile_graph(graph, profile, "-p", "reality:=typical")
    wait_kinematics(graph)
    out = tmp_path / "response.json"
    record_response(ResponseConfig(profile=profile, out=str(out), repeats=1, reset_service="arm_driver/reset"))
    path = read_response(out)
    assert 0.05 < path[7, 0] < 0.07 and path[-1, 2] < -0.05, path  # the probe moved the arm: 6 cm along x, down
    assert np.linalg.norm(path[0]) < 0.003, path  # the first action shows a step later: latency and a slower loop
    got = fit_response(path, base_kwargs={"randomization": {"joint_friction": [0.3, 0.3]}})
    print({k: v for k, v in got.items() if k != "candidates"})
    assert got["action_latency_steps"] == 1 and got["stiffness_scale"] >= 2.0, got
    # typical's gripper closes at 0.05 m/s: the next reset waits until it has opened again, as a sim episode starts
    from robot_rl.envs.ros_env import RosArmEnv

    env = RosArmEnv(profile=profile, reset_service="arm_driver/reset", connect_timeout=60.0)
    try:
        env.reset(seed=0)
        for _ in range(10):  # 0.5 s closing: about 25 mm
            obs, *_ = env.step(np.array([0, 0, 0, 1], np.float32))
        assert obs["state"][10] < 0.065, obs["state"]
        obs, _ = env.reset(seed=1)
        assert obs["state"][10] > 0.078, obs["state"]  # without the wait: about 0.06 (the arm is home at once)
    finally:
        env.close()
