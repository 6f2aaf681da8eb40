"""Arm tasks (Reach, PickCube, PegInsert) on the impedance-controlled 7-DoF arm, in real MuJoCo."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import robot_rl_sim  # noqa: E402, F401  (registers the gym ids)
from robot_rl_sim.arm_tasks import ArmTaskConfig, PegInsertEnv, PickColorEnv, PickCubeEnv, ReachEnv  # noqa: E402
from robot_rl_sim.randomization import RandomizationConfig  # noqa: E402

TASKS = {"Reach": ReachEnv, "PickCube": PickCubeEnv, "PegInsert": PegInsertEnv}
N_EPISODES = 20


def _rollout(env, policy, seed):
    obs, info = env.reset(seed=seed)
    for _ in range(env.cfg.max_episode_steps):
        obs, reward, terminated, truncated, info = env.step(policy())
        if terminated or truncated:
            break
    return info["is_success"], reward


@pytest.mark.filterwarnings("ignore:.*Box observation space m")  # the state Box is unbounded by design
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("image_size", [0, 32])
def test_check_env(task, image_size):
    env = gym.make(f"robot_rl/{task}-v0", image_size=image_size)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs["state"].dtype == np.float32 and obs["state"].shape == env.observation_space["state"].shape
    if image_size:
        assert set(obs["pixels"]) == {"front", "wrist"}
        assert all(img.shape == (32, 32, 3) and img.dtype == np.uint8 for img in obs["pixels"].values())
    else:
        assert "pixels" not in obs
    env.close()


def test_gym_make_overrides_and_task_defaults():
    env = gym.make("robot_rl/PickCube-v0", image_size=64, cameras=("wrist",))
    obs, _ = env.reset(seed=0)
    assert list(obs["pixels"]) == ["wrist"] and obs["pixels"]["wrist"].shape == (64, 64, 3)
    assert obs["pixels"]["wrist"].std() > 5  # a real image, not a blank frame
    env.close()
    env = ReachEnv(render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (256, 256, 3) and frame.dtype == np.uint8
    env.close()
    assert ReachEnv().cfg.max_episode_steps == 50 and PickCubeEnv().cfg.max_episode_steps == 100
    assert PegInsertEnv(max_episode_steps=7).cfg.max_episode_steps == 7
    cfg = ArmTaskConfig(max_step=0.01)
    assert ReachEnv(cfg, dense_reward=True).cfg.max_step == 0.01  # cfg + overrides
    with pytest.raises(ValueError):
        ReachEnv(workspace_low=(1.0, 0.0, 0.0))


def test_state_layout_options():
    base = ReachEnv()
    assert base.observation_space["state"].shape == (3 + 4 + 3 + 1 + 3,) and base.action_space.shape == (4,)
    assert PickCubeEnv(object_state=False).observation_space["state"].shape == (11,)
    assert PegInsertEnv(include_wrench=True).observation_space["state"].shape == (11 + 6 + 6,)
    env = ReachEnv(rotation_actions=True)
    assert env.action_space.shape == (7,)
    env.reset(seed=0)
    quat0 = env.step(np.zeros(7, np.float32))[0]["state"][3:7]
    for _ in range(10):
        env.step(np.array([0, 0, 0, 0, 0, 1.0, 0], np.float32))  # yaw the target by 10 x 0.1 rad
    for _ in range(10):
        obs = env.step(np.zeros(7, np.float32))[0]
    angle = 2 * np.degrees(np.arccos(abs(float(np.dot(quat0, obs["state"][3:7])))))
    assert abs(angle - np.degrees(1.0)) < 3.0  # the EE turned by 1 rad


@pytest.mark.parametrize("task", TASKS)
def test_determinism_under_seed(task):
    actions = np.random.default_rng(0).uniform(-1, 1, (15, 4)).astype(np.float32)
    runs = []
    for _ in range(2):
        env = TASKS[task](randomization=RandomizationConfig(friction_scale=(0.8, 1.2), obs_noise_std=0.001))
        states = [env.reset(seed=3)[0]["state"]]
        states += [env.step(a)[0]["state"] for a in actions]
        runs.append(np.stack(states))
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("task", TASKS)
def test_expert_succeeds_and_random_policy_does_not(task):
    env = TASKS[task]()
    expert = [_rollout(env, env.expert_action, seed) for seed in range(N_EPISODES)]
    assert np.mean([s for s, _ in expert]) >= 0.95
    assert all(r == 1.0 for s, r in expert if s)  # sparse reward 1 on success
    env.action_space.seed(0)
    random = [_rollout(env, env.action_space.sample, seed)[0] for seed in range(N_EPISODES)]
    assert np.mean(random) <= 0.05


def test_noisy_expert_and_dense_reward():
    env = PickCubeEnv(dense_reward=True)
    results = [_rollout(env, lambda: env.expert_action(noise=0.1), seed) for seed in range(5)]
    assert all(s for s, _ in results)
    assert all(r > 1.0 for _, r in results)  # shaped reward includes the success bonus


def test_workspace_clipping():
    env = ReachEnv()
    env.reset(seed=0)
    high = np.asarray(env.cfg.workspace_high)
    low = np.asarray(env.cfg.workspace_low)
    for _ in range(40):
        env.step(np.array([1.0, 1.0, 1.0, 0.0], np.float32))
    np.testing.assert_allclose(env.target_pos, high)
    assert np.all(env.ee_pos <= high + 0.005)
    for _ in range(60):
        env.step(np.array([-1.0, -1.0, -1.0, 0.0], np.float32))
    np.testing.assert_allclose(env.target_pos, low)
    assert np.all(env.ee_pos >= low - 0.005)
    # anti-windup: the target never leads the measured EE by more than max_target_lead
    env.reset(seed=1)
    env.step(np.array([0.0, 0.0, 1.0, 0.0], np.float32))
    assert np.all(np.abs(env.target_pos - env.ee_pos) <= env.cfg.max_target_lead + env.cfg.max_step)


def test_nan_action_is_rejected_and_held():
    env = PickCubeEnv()
    env.reset(seed=0)
    for _ in range(5):
        env.step(np.array([0.5, 0.0, 0.0, 1.0], np.float32))  # move and close the gripper
    target, ctrl = env.target_pos.copy(), env.data.ctrl.copy()
    obs, reward, terminated, truncated, info = env.step(np.array([np.nan, 0.0, np.inf, -1.0], np.float32))
    assert info["rejected_actions"] == 1
    np.testing.assert_array_equal(env.target_pos, target)  # target held
    np.testing.assert_array_equal(env.data.ctrl[7:], ctrl[7:])  # gripper command held (not opened)
    assert np.all(np.isfinite(obs["state"]))


def test_peg_starts_grasped_and_gripper_is_locked():
    env = PegInsertEnv()
    obs, _ = env.reset(seed=0)
    peg_bottom, hole = obs["state"][11:14], obs["state"][14:17]
    assert all(env.touching(env.peg_geoms)) and peg_bottom[2] > hole[2] + 0.1
    for _ in range(10):
        obs, _, terminated, _, _ = env.step(np.array([0.0, 0.0, 0.0, -1.0], np.float32))  # "open" is ignored
    assert all(env.touching(env.peg_geoms)) and not terminated


def test_domain_randomization_hooks():
    nominal = PickCubeEnv()
    nominal.reset(seed=0)
    nom = nominal.randomizer.nominal
    np.testing.assert_array_equal(nominal.model.geom_friction, nom["geom_friction"])
    np.testing.assert_array_equal(nominal.model.body_mass, nom["body_mass"])
    np.testing.assert_array_equal(nominal.model.cam_pos, nom["cam_pos"])
    rand = RandomizationConfig(friction_scale=(0.5, 0.7), mass_scale=(1.3, 1.5), camera_pos_noise=0.02)
    env = PickCubeEnv(randomization=rand)
    env.reset(seed=0)
    ratio = env.model.geom_friction[:, 0] / nom["geom_friction"][:, 0]
    assert np.all((ratio >= 0.5) & (ratio <= 0.7))
    cube = env.model.body("cube").id
    assert 1.3 <= env.model.body_mass[cube] / nom["body_mass"][cube] <= 1.5
    offsets = env.model.cam_pos - nom["cam_pos"]
    assert np.all(np.abs(offsets) <= 0.02) and np.any(np.abs(offsets) > 1e-4)
    assert env.model.camera("front").id in range(env.model.ncam)
    env.reset(seed=1)  # re-sampled around the nominal values, never drifting
    assert np.all(np.abs(env.model.cam_pos - nom["cam_pos"]) <= 0.02)
    success, _ = _rollout(env, env.expert_action, 0)  # the expert still works under randomised physics
    assert success


def test_action_latency_holds_the_gripper_until_the_delay_line_fills():
    env = PickCubeEnv(randomization={"action_latency_steps": 2})
    env.reset(seed=0)
    opening = env.gripper_opening()
    env.step(np.array([0.0, 0.0, 0.0, 1.0], np.float32))  # "close", applied two steps later
    assert env.gripper_opening() == pytest.approx(opening, abs=1e-3)  # not half-closed by a zero action
    env.step(np.array([np.nan, 0.0, 0.0, 1.0], np.float32))
    for _ in range(4):
        env.step(np.array([0.0, 0.0, 0.0, 1.0], np.float32))
    assert env.gripper_opening() < opening - 0.02  # the delayed close arrives


def test_peg_offset_features_resolve_millimetres():
    env = PegInsertEnv(offset_scale=0.005)
    obs, _ = env.reset(seed=0)
    state = obs["state"]
    assert state.shape == (11 + 6 + 3,)
    peg_bottom, hole, fine = state[11:14], state[14:17], state[17:20]
    np.testing.assert_allclose(fine, np.tanh((peg_bottom - hole) / 0.005), atol=1e-6)
    assert fine[2] > 0.99  # the peg starts 10+ cm above the hole: saturated
    for _ in range(60):  # the expert aligns over the hole: the x, y features come out of saturation
        obs, *_ = env.step(env.expert_action())
    assert np.all(np.abs(obs["state"][17:19]) < 0.5)
    with pytest.raises(ValueError):
        PegInsertEnv(offset_scale=-1.0)
    cubes = PickColorEnv(offset_scale=0.01)  # each cube relative to the tool centre point
    state = cubes.reset(seed=1)[0]["state"]
    assert state.shape == (11 + 9 + 9,)
    np.testing.assert_allclose(state[20:], np.tanh((state[11:20] - np.tile(state[:3], 3)) / 0.01), atol=1e-5)
    assert PickCubeEnv(offset_scale=0.01).observation_space["state"].shape == (11 + 3 + 3,)
    reach = ReachEnv(offset_scale=0.01).reset(seed=2)[0]["state"]  # the target relative to the tool centre point
    np.testing.assert_allclose(reach[14:], np.tanh((reach[11:14] - reach[:3]) / 0.01), atol=1e-5)
    assert PickCubeEnv(offset_scale=0.01, object_state=False).observation_space["state"].shape == (11,)


def test_start_offset_starts_at_rest_inside_the_box_with_the_same_placements():
    """start_offset: each episode begins with the EE at rest somewhere in home +- the box (only down along z), gripper
    open; the objects are placed as without it (the offset is drawn after them)."""
    home = PickCubeEnv()
    env = PickCubeEnv(start_offset=(0.1, 0.12, 0.2))
    home_state = home.reset(seed=0)[0]["state"]
    starts = []
    for seed in range(6):
        state = env.reset(seed=seed)[0]["state"]
        ref = home.reset(seed=seed)[0]["state"]
        assert np.allclose(state[11:14], ref[11:14], atol=1e-4), seed  # same cube placement (settled)
        assert np.linalg.norm(state[7:10]) < 0.005 and state[10] > 0.07, state  # at rest, gripper open
        offset = state[:3] - home_state[:3]
        assert np.all(np.abs(offset) <= np.array([0.1, 0.12, 0.2]) + 0.005) and offset[2] <= 0.005, offset
        starts.append(state[:3])
    assert np.ptp(np.array(starts), axis=0).min() > 0.02  # they differ
    with pytest.raises(ValueError, match="start_offset"):
        PickCubeEnv(start_offset=(0.1, -0.1, 0.0))


def test_joint_friction_randomization_slows_the_arm_and_is_drawn_afresh_each_reset():
    """randomization.joint_friction / joint_damping (what robot-rl calibrate writes): added to every arm joint on
    each reset, never accumulating, and the same action then moves the end effector less far in a control step
    (the impedance law hides small amounts: the large ones here show it)."""
    def reach(env: PickCubeEnv, seed: int) -> float:
        env.reset(seed=seed)
        start = env.ee_pos.copy()
        env.step(np.array([1.0, 0.0, 0.0, 1.0]))
        return float(np.linalg.norm(env.ee_pos - start))

    nominal = PickCubeEnv(image_size=0)
    rough = PickCubeEnv(image_size=0, randomization={"joint_friction": (2.0, 2.0), "joint_damping": (5.0, 5.0)})
    arm = list(rough.arm_dofs)
    free = reach(nominal, 0)
    for seed in (0, 1):  # a second reset draws again from the nominal values, it does not add to the last draw
        slowed = reach(rough, seed)
        assert np.allclose(rough.model.dof_frictionloss[arm], nominal.model.dof_frictionloss[arm] + 2.0)
        assert np.allclose(rough.model.dof_damping[arm], nominal.model.dof_damping[arm] + 5.0)
    assert slowed < 0.9 * free, (slowed, free)
    with pytest.raises(ValueError, match="joint_friction"):
        RandomizationConfig(joint_friction=(0.5, 0.1)).validate()


def test_a_slower_gripper_closes_at_its_speed_and_the_expert_still_picks():
    """randomization.gripper_speed (what robot-rl calibrate writes for a gripper slower than the sim's): the
    opening closes at about that speed, where the sim's own gripper closes in a step or two; the scripted
    expert, which waits for the grasp, still lifts the cube."""
    def closed_after(env: PickCubeEnv, steps: int) -> float:
        env.reset(seed=0)
        opening = env.gripper_opening()
        for _ in range(steps):
            env.step(np.array([0.0, 0.0, 0.0, 1.0], np.float32))
        return opening - env.gripper_opening()

    slow = PickCubeEnv(image_size=0, randomization={"gripper_speed": (0.05, 0.05)})
    period = slow.n_substeps * slow.model.opt.timestep
    assert closed_after(PickCubeEnv(image_size=0), 2) > 0.05  # the sim's own: nearly shut in 0.1 s
    moved = closed_after(slow, 10)
    assert moved == pytest.approx(0.05 * 10 * period, rel=0.25), moved
    success, _ = _rollout(slow, slow.expert_action, 0)
    assert success
    with pytest.raises(ValueError, match="gripper_speed"):
        RandomizationConfig(gripper_speed=(0.1, 0.05)).validate()


def test_step_velocity_is_the_steps_displacement_and_reads_a_stiff_arms_speed():
    """``ee_velocity="step"``: the state's EE velocity is the last control step's displacement over its period (0
    at reset), where ``instant`` reads a stiff arm (a calibrated sim's 5x) slowing at the end of each burst."""
    stiff = {"stiffness_scale": (5.0, 5.0)}
    envs = {mode: PickCubeEnv(ee_velocity=mode, randomization=stiff) for mode in ("instant", "step")}
    speeds = {}
    for mode, env in envs.items():
        obs, _ = env.reset(seed=3)
        if mode == "step":
            assert np.all(obs["state"][7:10] == 0)
        for _ in range(6):
            before = obs["state"][:3].copy()
            obs, *_ = env.step(np.array([0.0, 0.0, -1.0, -1.0], np.float32))
        if mode == "step":
            np.testing.assert_allclose(obs["state"][7:10], (obs["state"][:3] - before) * env.cfg.control_hz, atol=1e-4)
        speeds[mode] = -float(obs["state"][9])
    assert speeds["step"] == pytest.approx(0.4, abs=0.02)  # max_step 0.02 m per 50 ms
    assert speeds["instant"] < 0.8 * speeds["step"]
    with pytest.raises(ValueError, match="ee_velocity"):
        PickCubeEnv(ee_velocity="mean")
