"""The camera fit finds a camera that is not where, or not the lens, the description says: frames rendered from the
true pose and lens of the ``typical`` reality profile (``robot_rl_sim.camera_error``, as the rehearsal driver
renders them) with its colour gains, the arm held at a few poses, the task's cube moved where the fit's scene does
not have it."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robot_rl.calibration.camera import CameraFitConfig, CameraFrame, candidate_pose, fit_camera, held_frames, project
from robot_rl.calibration.log import DriverLog
from robot_rl_sim import arm_tasks
from robot_rl_sim.camera_error import camera_error, true_pose
from robot_rl_sim.reality import load_reality


def robot_frames(camera: str, size: int, poses: int = 6) -> list[CameraFrame]:
    reality = load_reality("typical")
    env = arm_tasks.PickCubeEnv(image_size=0)
    env.reset(seed=3)  # the fit's scene is reset with seed 0: its cube lies elsewhere
    b = reality.brightness_change
    gains = np.array([1 + b, 1 + b, 1 - b])
    rng = np.random.default_rng(0)
    q0, frames = env.data.qpos[env.arm_qpos].copy(), []
    for k in range(poses):
        q, opening = q0 + rng.uniform(-0.12, 0.12, 7), 0.08 * (k % 2)
        env.data.qpos[env.arm_qpos], env.data.qpos[env.finger_qpos] = q, opening / 2
        mujoco.mj_forward(env.model, env.data)
        with camera_error(env.model, env.data, camera, reality):
            image = env.render_camera(camera, size)
        frames.append(CameraFrame(image=np.clip(image * gains, 0, 255).astype(np.uint8), q=q, opening=opening))
    return frames


def test_candidate_pose_matches_the_reality_profiles_camera_error() -> None:
    """The fit's parametrisation holds the profile's error: its diagonal offset and pan as an offset and rotation."""
    reality = load_reality("typical")
    xpos, xmat = np.array([1.0, 0.3, 0.45]), np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0]
    offset = reality.camera_position_error * np.array([1.0, -1.0, -1.0]) / np.sqrt(3.0)
    x = np.r_[offset, 0.0, reality.camera_rotation_error, 0.0, 0.0]
    for got, want in zip(candidate_pose(xpos, xmat, x), true_pose(xpos, xmat, reality), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_project_puts_the_cube_where_the_renderer_draws_it() -> None:
    """``project`` and MuJoCo's renderer agree: the cube's centre falls on red pixels of the front camera's image, a
    point beside it off them."""
    env = arm_tasks.PickCubeEnv(image_size=0)
    env.reset(seed=0)
    m, d, cid = env.model, env.data, env.model.camera("front").id
    image = env.render_camera("front", 128).astype(int)
    cube = d.xpos[m.body("cube").id]
    (u, v), (u2, v2) = project(np.stack([cube, cube + [0.0, 0.06, 0.0]]), d.cam_xpos[cid], d.cam_xmat[cid],
                               float(m.cam_fovy[cid]), 128)
    r, g, b = image[int(v), int(u)]
    assert r > 100 and r > 2 * g and r > 2 * b, (u, v, image[int(v), int(u)])
    r, g, b = image[int(v2), int(u2)]
    assert not (r > 2 * g and r > 2 * b), (u2, v2, image[int(v2), int(u2)])


def test_frames_of_a_moving_arm_or_another_size_are_refused() -> None:
    frames = robot_frames("front", 32, poses=2)
    frames[1].image = frames[1].image[:, :16]
    with pytest.raises(ValueError, match="square RGB of one size"):
        fit_camera(frames, "front", CameraFitConfig(iterations=1))
    with pytest.raises(ValueError, match="not a camera"):
        fit_camera(frames[:1], "nowhere", CameraFitConfig(iterations=1))


def test_a_held_frame_shows_the_mean_of_the_held_joint_states_not_their_noise() -> None:
    # 500 Hz joint states: the arm held at 0 for 1 s (noise 3e-4 rad), moved for 0.1 s, held at 0.05 rad from 1.1 s;
    # one frame stamped in the first hold, 0.2 s before the move
    t = np.arange(0.0, 2.0, 0.002)
    q = np.zeros((len(t), 7)) + np.random.default_rng(0).normal(0.0, 3e-4, (len(t), 7))
    moving = (t > 1.0) & (t <= 1.1)
    q[t > 1.0] += np.minimum(t[t > 1.0, None] - 1.0, 0.1) * 0.5
    qd = np.where(moving[:, None], 0.5, 0.0) * np.ones(7)
    none = np.zeros(0)
    log = DriverLog(none, np.zeros((0, 7)), t, t, q, qd, np.full_like(q, np.nan), np.full(len(t), 0.04), none, none)
    image = np.zeros((8, 8, 3), np.uint8)
    nearest = held_frames([(0.9, 0.95, image)], log, 1)[0]
    averaged = held_frames([(0.9, 0.95, image)], log, 1, average=0.3)[0]
    assert np.abs(nearest.q).max() > 3e-4  # one state: its noise
    # 250 states of its own hold (not the move after 1 s, nor the next hold at 1.1-1.2 s): near 0
    assert np.abs(averaged.q).max() < 1.5e-4
    assert averaged.opening == pytest.approx(0.04)
    with pytest.raises(ValueError, match="held still"):
        held_frames([(1.05, 1.1, image)], log, 1, average=0.3)


@pytest.mark.parametrize("camera", ["front", "wrist"])
def test_the_training_sim_with_the_calibrated_camera_renders_what_the_robot_shows(camera: str) -> None:
    """``randomization.camera_offsets`` (what calibrate writes into env_kwargs.json) puts the sim's camera where the
    robot's is: its renders match the robot's frames, where the described camera's differ."""
    reality = load_reality("typical")
    offset = [*(reality.camera_position_error * np.array([1.0, -1.0, -1.0]) / np.sqrt(3.0)), 0.0,
              reality.camera_rotation_error, 0.0, reality.camera_focal_error]
    robot = arm_tasks.PickCubeEnv(image_size=0)
    calibrated = arm_tasks.PickCubeEnv(image_size=0, randomization={"camera_offsets": {camera: offset}})
    robot.reset(seed=0)
    calibrated.reset(seed=0)
    q = robot.data.qpos[robot.arm_qpos] + 0.1
    for env in (robot, calibrated):
        env.data.qpos[env.arm_qpos] = q
        mujoco.mj_forward(env.model, env.data)
    described = robot.render_camera(camera, 96).astype(float)
    with camera_error(robot.model, robot.data, camera, reality):
        shown = robot.render_camera(camera, 96).astype(float)
    rendered = calibrated.render_camera(camera, 96).astype(float)
    assert np.abs(rendered - shown).mean() < 0.05 * np.abs(described - shown).mean(), (
        np.abs(rendered - shown).mean(), np.abs(described - shown).mean())
    with pytest.raises(ValueError, match="no camera 'nowhere'"):
        arm_tasks.PickCubeEnv(image_size=0, randomization={"camera_offsets": {"nowhere": offset}})


def test_the_training_sim_with_the_calibrated_colour_sees_the_robots_gains() -> None:
    """``randomization.image_gains`` (calibrate writes the camera's fitted gains) colours every image observation."""
    gains = (1.08, 1.08, 0.92)
    plain = arm_tasks.PickCubeEnv(image_size=32).reset(seed=0)[0]["pixels"]
    tinted = arm_tasks.PickCubeEnv(image_size=32, randomization={"image_gains": gains}).reset(seed=0)[0]["pixels"]
    for camera, image in plain.items():
        want = np.clip(image * np.array(gains, np.float32), 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(tinted[camera], want)
        assert tinted[camera].dtype == np.uint8 and not np.array_equal(tinted[camera], image)
    with pytest.raises(ValueError, match="image_gains"):
        arm_tasks.PickCubeEnv(image_size=32, randomization={"image_gains": (1.0, 1.0)})


def test_the_training_sim_with_the_calibrated_camera_latency_sees_late_images() -> None:
    """``randomization.image_latency_steps`` (calibrate writes the camera's latency in control steps): each image
    observation is the one of that many steps before, while the state is the current one."""
    late = arm_tasks.PickCubeEnv(image_size=32, randomization={"image_latency_steps": 2})
    now = arm_tasks.PickCubeEnv(image_size=32)
    seen = [o for o in (late.reset(seed=0)[0], now.reset(seed=0)[0])]
    frames, states = [seen[1]["pixels"]["wrist"]], []
    for _ in range(4):
        action = np.array([0.0, 0.0, -1.0, 1.0], np.float32)  # down, the wrist camera's view changes each step
        a, b = late.step(action)[0], now.step(action)[0]
        frames.append(b["pixels"]["wrist"])
        np.testing.assert_array_equal(a["state"], b["state"])
        states.append(a["pixels"]["wrist"])
    np.testing.assert_array_equal(states[0], frames[0])  # the oldest there is just after the reset
    for k in range(2, 4):
        np.testing.assert_array_equal(states[k], frames[k - 1])
    assert not np.array_equal(frames[3], frames[1])


def test_image_latency_jitter_shows_frames_of_varying_age() -> None:
    """``randomization.image_latency_jitter``: each image observation is 1 to 1 + jitter steps old, drawn per step
    (a robot's frames come at the camera's rate), never newer or older."""
    late = arm_tasks.PickCubeEnv(image_size=32, randomization={"image_latency_steps": 1, "image_latency_jitter": 2})
    now = arm_tasks.PickCubeEnv(image_size=32)
    late.reset(seed=0)
    frames = [now.reset(seed=0)[0]["pixels"]["wrist"]]
    ages = []
    for _ in range(14):
        action = np.array([0.0, 0.0, -0.5, 1.0], np.float32)
        seen = late.step(action)[0]["pixels"]["wrist"]
        frames.append(now.step(action)[0]["pixels"]["wrist"])
        ages.append(next(a for a in range(len(frames)) if np.array_equal(seen, frames[-1 - a])))
    assert set(ages[3:]) <= {1, 2, 3} and len(set(ages[3:])) > 1, ages


@pytest.mark.timeout(120)
def test_the_camera_fit_is_the_same_on_two_worker_processes_as_on_one() -> None:
    """The candidates of each generation rendered by spawned workers, each with a scene of its own: the same search,
    whatever the number of processes."""
    frames = robot_frames("wrist", 32, poses=3)
    fits = [fit_camera(frames, "wrist", CameraFitConfig(iterations=4, refit_iterations=2, refine_iterations=0,
                                                         size=32, workers=workers)) for workers in (1, 2)]
    assert fits[0].history == fits[1].history and fits[0].position == fits[1].position, fits
    assert fits[0].evaluations == fits[1].evaluations == 6 * 14, fits[0].evaluations
