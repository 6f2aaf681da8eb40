"""Drive task (differential-drive car on a walled track, FastRLAP-style checkpoints) and its twist law, in MuJoCo."""

import math
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import robot_rl_sim  # noqa: E402, F401  (registers the gym ids)
from robot_rl.envs.batched import make_batched  # noqa: E402
from robot_rl_controllers.driving import (  # noqa: E402
    DifferentialDriveParams,
    twist_to_wheel_speeds,
    wheel_speeds_to_twist,
)
from robot_rl_sim.car import DriveConfig, DriveEnv  # noqa: E402
from robot_rl_sim.car_model import Track  # noqa: E402
from robot_rl_sim.randomization import RandomizationConfig  # noqa: E402

N_EPISODES = 20
FORWARD = np.array([1.0, 0.0], np.float32)


def _rollout(env, policy, seed):
    obs, info = env.reset(seed=seed)
    rewards = []
    for _ in range(env.cfg.max_episode_steps):
        obs, reward, terminated, truncated, info = env.step(policy())
        rewards.append(reward)
        if terminated or truncated:
            break
    return info, rewards


def _into_inner_wall(env):
    """Puts the car on the bottom straight facing the inner wall (0.5 m to its left)."""
    env.place_car(1.0, 0.0, math.pi / 2)


# ------------------------------------------------------------------ twist law
def test_twist_to_wheel_speeds_round_trip_and_saturation():
    p = DifferentialDriveParams(track_width=0.3, wheel_radius=0.05, max_wheel_speed=50.0)
    left, right = twist_to_wheel_speeds(1.0, 2.0, p)
    assert (left, right) == pytest.approx(((1.0 - 0.3) / 0.05, (1.0 + 0.3) / 0.05))
    np.testing.assert_allclose(wheel_speeds_to_twist(left, right, p), (1.0, 2.0))
    left, right = twist_to_wheel_speeds(4.0, 2.0, p)  # beyond the wheel limit: scaled, curvature kept
    assert max(abs(left), abs(right)) == pytest.approx(50.0)
    v, w = wheel_speeds_to_twist(left, right, p)
    assert w / v == pytest.approx(2.0 / 4.0) and v < 4.0
    v = np.array([[0.5, -1.0], [0.0, 2.0]])  # batched
    w = np.array([[1.0, 0.0], [3.0, -1.0]])
    left, right = twist_to_wheel_speeds(v, w, p)
    assert left.shape == (2, 2)
    np.testing.assert_allclose(np.stack(wheel_speeds_to_twist(left, right, p)), np.stack([v, w]))
    with pytest.raises(ValueError, match="wheel_radius"):
        DifferentialDriveParams(wheel_radius=0.0).validate()


def test_track_geometry():
    track = Track((6.0, 4.0), 1.2, 1.0)
    assert track.length == pytest.approx(2 * (3.6 + 1.6) + 2 * math.pi * 1.2)
    for s in np.linspace(0, track.length, 37, endpoint=False):
        for lateral in (-0.4, 0.0, 0.3):
            xy, _ = track.pose(s, lateral)
            s2, lat2, _ = track.project(xy)
            assert min(abs(s2 - s), track.length - abs(s2 - s)) < 0.01 and lat2 == pytest.approx(lateral, abs=0.01)


# ------------------------------------------------------------------ env basics
@pytest.mark.filterwarnings("ignore:.*Box observation space m")  # the state Box is unbounded by design
@pytest.mark.parametrize("image_size", [0, 32])
def test_check_env(image_size):
    env = gym.make("robot_rl/Drive-v0", image_size=image_size)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs["state"].dtype == np.float32 and obs["state"].shape == (8 + 7,)
    assert env.action_space.shape == (2,)
    if image_size:
        assert list(obs["pixels"]) == ["front"]
        img = obs["pixels"]["front"]
        assert img.shape == (32, 32, 3) and img.dtype == np.uint8 and img.std() > 5
    else:
        assert "pixels" not in obs
    env.close()


def test_config_overrides_and_validation():
    env = gym.make("robot_rl/Drive-v0", n_ranges=0, cameras=("top",), image_size=16, collision_penalty=0.5)
    assert env.unwrapped.cfg.collision_penalty == 0.5
    obs, _ = env.reset(seed=0)
    assert obs["state"].shape == (8,) and list(obs["pixels"]) == ["top"]
    assert DriveEnv(max_episode_steps=7).cfg.max_episode_steps == 7
    assert DriveEnv().cfg.max_episode_steps == DriveConfig().max_episode_steps == 400
    assert DriveEnv(DriveConfig(max_speed=1.0), dense_reward=True).cfg.max_speed == 1.0
    frame = DriveEnv(render_mode="rgb_array")
    frame.reset(seed=0)
    assert frame.render().shape == (256, 256, 3)
    for bad, field in [({"collision_mode": "bounce"}, "collision_mode"), ({"track_width": 3.0}, "track_width"),
                       ({"n_checkpoints": 0}, "n_checkpoints"), ({"max_speed": -1.0}, "max_speed"),
                       ({"track_size": (2.0, 4.0)}, "track_size"), ({"start_lateral_noise": 0.4}, "start_lateral")]:
        with pytest.raises(ValueError, match=field):
            DriveEnv(**bad)


def test_twist_semantics_and_state():
    env = DriveEnv(random_start=False, start_lateral_noise=0.0, start_heading_noise=0.0)
    obs, _ = env.reset(seed=0)
    assert obs["state"][3:6] == pytest.approx([0.0, 1.0, 0.0], abs=1e-4)  # aligned, on the centreline
    ranges = obs["state"][8:]
    assert ranges[0] == pytest.approx(0.5, abs=0.01) and ranges[-1] == pytest.approx(0.5, abs=0.01)  # walls +-90°
    assert ranges[3] == pytest.approx(3.0)  # straight ahead: nothing within range_max
    for _ in range(20):  # 1 s at half speed
        obs, *_ = env.step(np.array([0.5, 0.0], np.float32))
    assert obs["state"][0] == pytest.approx(1.0, abs=0.05) and abs(obs["state"][1]) < 0.05
    assert env.progress == pytest.approx(0.9, abs=0.1)  # ~0.1 s to get up to speed
    env.reset(seed=0)
    for _ in range(10):  # turn on the spot at 1/3 of the yaw rate limit
        obs, *_ = env.step(np.array([0.0, 1 / 3], np.float32))
    assert obs["state"][2] == pytest.approx(1.0, abs=0.05) and abs(obs["state"][0]) < 0.05
    assert env.car_pose()[1] == pytest.approx(0.45, abs=0.1)


def test_nan_action_is_rejected_and_the_car_stops():
    env = DriveEnv()
    env.reset(seed=0)
    for _ in range(10):
        env.step(FORWARD * 0.5)
    for _ in range(10):
        obs, _, _, _, info = env.step(np.array([np.nan, np.inf], np.float32))
    assert info["rejected_actions"] == 10 and abs(obs["state"][0]) < 0.05 and np.all(np.isfinite(obs["state"]))


@pytest.mark.parametrize("obs_noise", [0.0, 0.01])
def test_determinism_under_seed(obs_noise):
    actions = np.random.default_rng(0).uniform(-1, 1, (30, 2)).astype(np.float32)
    runs = []
    for _ in range(2):
        env = DriveEnv(randomization=RandomizationConfig(friction_scale=(0.7, 1.3), obs_noise_std=obs_noise))
        states = [env.reset(seed=3)[0]["state"]]
        states += [env.step(a)[0]["state"] for a in actions]
        runs.append(np.stack(states))
    np.testing.assert_array_equal(runs[0], runs[1])
    other = DriveEnv().reset(seed=4)[0]["state"]
    assert not np.array_equal(runs[0][0], other)  # the start pose depends on the seed


# ------------------------------------------------------------------ task outcome
def test_expert_succeeds_and_random_policy_does_not():
    env = DriveEnv()
    expert = [_rollout(env, env.expert_action, seed) for seed in range(N_EPISODES)]
    assert np.mean([info["is_success"] for info, _ in expert]) >= 0.95
    for info, rewards in expert:
        if info["is_success"]:  # sparse reward: 1 per checkpoint, a lap = n_checkpoints
            assert info["checkpoints"] == 12 and sum(rewards) == 12 and info["collisions"] == 0
    noisy = [_rollout(env, lambda: env.expert_action(noise=0.1), seed)[0]["is_success"] for seed in range(10)]
    assert np.mean(noisy) >= 0.9
    env.action_space.seed(0)
    random = [_rollout(env, env.action_space.sample, seed)[0]["is_success"] for seed in range(N_EPISODES)]
    assert np.mean(random) <= 0.05


def test_reward_on_checkpoints_and_dense_progress():
    env = DriveEnv(dense_reward=True, progress_reward=0.5, terminate_on_success=False, max_episode_steps=120)
    obs, info = env.reset(seed=1)
    seen, total = 0, 0.0
    for _ in range(120):
        before = env.progress
        obs, reward, terminated, truncated, info = env.step(env.expert_action())
        gained = info["checkpoints"] - seen
        seen = info["checkpoints"]
        assert reward == pytest.approx(gained + 0.5 * (info["progress"] - before), abs=1e-9)
        total += reward
    assert 4 <= seen <= 8 and info["progress"] > 6.0  # ~6 m/checkpoints in 6 s
    assert total == pytest.approx(seen + 0.5 * info["progress"])
    # the next-checkpoint vector in the state points ahead, at most one spacing away
    assert 0 < obs["state"][6] <= env.track.length / 12 + 0.3
    sparse = DriveEnv(max_episode_steps=60)  # sparse: reward only on the checkpoint steps
    _, rewards = _rollout(sparse, sparse.expert_action, 1)
    assert set(rewards) <= {0.0, 1.0} and sum(rewards) >= 1


def test_collision_terminates():
    env = DriveEnv()
    env.reset(seed=0)
    _into_inner_wall(env)
    for _ in range(30):
        obs, reward, terminated, truncated, info = env.step(FORWARD)
        if terminated:
            break
    assert terminated and not truncated and env.steps < 15
    assert info["collisions"] == 1 and reward == -1.0 and not info["is_success"]
    assert obs["state"][8 + 3] < 0.3  # the straight-ahead range reading sees the wall it hit


def test_collision_resets_to_the_last_checkpoint():
    env = DriveEnv(collision_mode="reset_to_checkpoint")
    env.reset(seed=2)
    while env.checkpoints < 2:  # drive past two checkpoints
        env.step(env.expert_action())
    last = env.next_checkpoint - env.spacing
    xy, yaw = env.car_pose()
    s = env.track.project(xy)[0]
    env.place_car(s, 0.0, math.pi / 2)  # then turn into the inner wall (progress bookkeeping kept)
    for _ in range(30):
        obs, reward, terminated, truncated, info = env.step(FORWARD)
        if info["collisions"]:
            break
    assert info["collisions"] == 1 and reward == -1.0 and not terminated and not truncated
    assert env.progress == pytest.approx(last) and info["checkpoints"] == 2
    cp_xy, cp_yaw = env.track.pose(env.lap.s0 + last)
    np.testing.assert_allclose(env.car_pose()[0], cp_xy, atol=1e-6)  # on the centreline at the checkpoint
    assert env.car_pose()[1] == pytest.approx(cp_yaw) and abs(obs["state"][0]) < 1e-6  # facing along, at rest
    for _ in range(env.cfg.max_episode_steps):  # the episode goes on and the lap can still be completed
        obs, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            break
    assert info["is_success"] and info["collisions"] == 1 and info["checkpoints"] == 12


# ------------------------------------------------------------------ batched and randomised
def test_batched_drive_equals_single_envs():
    n, kwargs = 3, {"max_episode_steps": 25, "collision_mode": "reset_to_checkpoint", "image_size": 16}
    actions = np.random.default_rng(1).uniform(-1, 1, (60, n, 2)).astype(np.float32)
    singles = [gym.make("robot_rl/Drive-v0", **kwargs) for _ in range(n)]
    for i, env in enumerate(singles):
        env.reset(seed=10 + i)
    batched = make_batched("robot_rl/Drive-v0", n, **kwargs)
    batched.reset(seed=10)
    resets = 0
    for a in actions:
        obs, reward, terminated, truncated, info = batched.step(a)
        for i, env in enumerate(singles):
            o, r, term, trunc, _ = env.step(a[i])
            if term or trunc:
                resets += 1
                np.testing.assert_array_equal(info["final_obs"]["state"][i], o["state"])
                o, _ = env.reset()
            np.testing.assert_array_equal(obs["state"][i], o["state"])
            np.testing.assert_array_equal(obs["pixels"]["front"][i], o["pixels"]["front"])
            assert (reward[i], terminated[i], truncated[i]) == (np.float32(r), term, trunc)
    assert resets >= 2 * n
    batched.close()


def test_domain_randomization_changes_what_it_claims():
    nominal = DriveEnv(image_size=32)
    obs0, _ = nominal.reset(seed=0)
    nom = nominal.randomizer.nominal
    np.testing.assert_array_equal(nominal.model.geom_friction, nom["geom_friction"])
    rand = RandomizationConfig(friction_scale=(0.5, 0.6), mass_scale=(1.4, 1.5), damping_scale=(2.0, 3.0),
                               camera_pos_noise=0.03, light_noise=0.2)
    env = DriveEnv(image_size=32, randomization=rand)
    obs, _ = env.reset(seed=0)
    ratio = env.model.geom_friction[:, 0] / nom["geom_friction"][:, 0]
    assert np.all((ratio >= 0.5) & (ratio <= 0.6))
    car = env.model.body("car").id
    assert 1.4 <= env.model.body_mass[car] / nom["body_mass"][car] <= 1.5
    wheel = env.model.joint("wheel_left").dofadr[0]
    assert 2.0 <= env.model.dof_damping[wheel] / nom["dof_damping"][wheel] <= 3.0
    front = env.model.camera("front").id
    offset = env.model.cam_pos[front] - nom["cam_pos"][front]
    assert np.all(np.abs(offset) <= 0.03) and np.any(np.abs(offset) > 1e-3)
    assert not np.array_equal(env.model.light_diffuse, nom["light_diffuse"])
    np.testing.assert_array_equal(obs["state"], obs0["state"])  # same seed, same start pose...
    assert np.abs(obs["pixels"]["front"].astype(int) - obs0["pixels"]["front"]).mean() > 1  # ...other image
    info, _ = _rollout(env, env.expert_action, 0)  # the expert still laps under randomised physics
    assert info["is_success"]


def test_latency_and_observation_noise():
    env = DriveEnv(random_start=False, start_lateral_noise=0.0, start_heading_noise=0.0,
                   randomization={"action_latency_steps": 2, "obs_noise_std": 0.05})
    obs, _ = env.reset(seed=0)
    assert abs(obs["state"][4] - 1.0) > 1e-4  # cos(heading error) = 1 exactly without noise
    for _ in range(2):  # the first two actions fall into the delay line: the car holds still
        env.step(FORWARD)
    assert np.linalg.norm(env.data.qvel[:2]) < 1e-3
    env.step(FORWARD)
    assert env.data.qvel[0] > 0.1


def test_a_car_like_robot_cannot_turn_tighter_than_its_radius():
    """min_turn_radius (an Ackermann car's wheelbase / tan(max steering)): full yaw at 0.5 m/s turns at 0.5 / R
    rad/s, as the ackermann profile's steering limit allows; a differential drive turns at what it is asked."""
    turn = np.array([0.25, 1.0], np.float32)  # 0.5 m/s, 3 rad/s asked
    for radius, expected in ((0.0, 3.0), (0.74, 0.5 / 0.74)):
        env = DriveEnv(random_start=False, start_lateral_noise=0.0, start_heading_noise=0.0, min_turn_radius=radius)
        env.reset(seed=0)
        for _ in range(10):
            obs, *_ = env.step(turn)
        assert obs["state"][2] == pytest.approx(expected, rel=0.1), radius
    with pytest.raises(ValueError, match="min_turn_radius"):
        DriveEnv(min_turn_radius=-1.0)


def test_a_randomized_drivetrain_lags_curves_and_misreports_its_speed() -> None:
    """``randomization`` with a car's lags, trim and odometry gain (what a car reality profile does to the rehearsal
    car), against the nominal car from the same start: slower to speed, curving when commanded straight, reporting
    its speed a factor off (state[0]: forward speed)."""
    straight = np.array([0.25, 0.0], np.float32)  # 0.5 m/s
    runs = {}
    for name, rnd in (("nominal", {}), ("real", {"speed_lag": (0.3, 0.3), "trim_curvature": (0.4, 0.4),
                                                  "odometry_speed_scale": (1.2, 1.2)})):
        env = DriveEnv(randomization=rnd, random_start=False, start_lateral_noise=0.0, start_heading_noise=0.0)
        env.reset(seed=0)
        yaw0 = env.car_pose()[1]
        for _ in range(2):
            obs = env.step(straight)[0]
        first = float(np.hypot(*env.data.qvel[env.car_v][:2]))
        for _ in range(4):
            obs = env.step(straight)[0]
        true = float(np.hypot(*env.data.qvel[env.car_v][:2]))
        runs[name] = (first, env.car_pose()[1] - yaw0, obs["state"][0] / true)
        env.close()
    (nom_first, nom_turn, nom_scale), (real_first, real_turn, real_scale) = runs["nominal"], runs["real"]
    assert nom_first > 0.45 and real_first < 0.6 * nom_first  # 100 ms after the command
    assert abs(nom_turn) < 0.002 and real_turn > 0.01
    assert nom_scale == pytest.approx(1.0, abs=0.02) and real_scale == pytest.approx(1.2, abs=0.03)
