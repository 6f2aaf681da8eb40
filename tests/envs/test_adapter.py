"""The contract adapter on envs written here: observation mapping (nested, LeRobot-style, images in any layout),
action scaling, success and intervention keys, tiled render, and the errors that name the field."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from robot_rl.envs import EnvConfig, ObsMapConfig, WrapperConfig, make_env
from robot_rl.envs.adapter import ContractAdapter, tile_frames
from robot_rl.spaces import ObsSpec, action_dim_of


class Foreign(gym.Env):
    """Nested Dict observation with foreign names, images in three layouts, success and takeover under own keys."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Dict({
            "arm": gym.spaces.Dict({"q": gym.spaces.Box(-1, 1, (3,)), "dq": gym.spaces.Box(-1, 1, (3,))}),
            "goal": gym.spaces.Box(-1, 1, (2,), np.float64),
            "cam_hwc": gym.spaces.Box(0, 255, (8, 10, 3), np.uint8),
            "cam_chw": gym.spaces.Box(0.0, 1.0, (3, 8, 10), np.float32),
            "cam_gray": gym.spaces.Box(0, 255, (8, 10), np.uint8),
        })
        self.action_space = gym.spaces.Box(np.array([0.0, -2.0]), np.array([10.0, 2.0]), dtype=np.float64)
        self.t = 0
        self.last_action = None

    def _obs(self) -> dict:
        t = float(self.t)
        return {"arm": {"q": np.full(3, t / 10, np.float32), "dq": np.full(3, -t / 10, np.float32)},
                "goal": np.array([0.5, -0.5]), "cam_hwc": np.full((8, 10, 3), 7, np.uint8),
                "cam_chw": np.stack([np.full((8, 10), c / 4, np.float32) for c in range(3)]),
                "cam_gray": np.full((8, 10), 200, np.uint8)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.last_action = np.asarray(action)
        human = self.t % 2 == 0
        info = {"done_ok": self.t >= 3, "human": human, "human_action": np.array([10.0, 0.0]) if human else None}
        return self._obs(), 1.0, self.t >= 3, False, info

    def render(self):
        return [np.zeros((4, 5, 3), np.uint8), np.full((6, 2, 3), 255, np.uint8)]


def adapt(**env_fields) -> ContractAdapter:
    return ContractAdapter(Foreign(), EnvConfig(id="test:Foreign", **env_fields))


def test_auto_map_takes_1d_entries_as_state_and_images_as_cameras() -> None:
    env = adapt()
    spec = ObsSpec.from_space(env.observation_space)
    assert spec.state_dim == 3 + 3 + 2 and set(spec.cameras) == {"cam_hwc", "cam_chw", "cam_gray"}
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(np.zeros(2, np.float32))
    # sorted keys: arm.dq, arm.q, goal
    np.testing.assert_allclose(obs["state"], [-0.1] * 3 + [0.1] * 3 + [0.5, -0.5], rtol=1e-6)
    assert obs["state"].dtype == np.float32
    assert obs["pixels"]["cam_chw"].shape == (8, 10, 3) and obs["pixels"]["cam_chw"].dtype == np.uint8
    assert list(obs["pixels"]["cam_chw"][0, 0]) == [0, 63, 127]  # float [0, 1] channels -> uint8
    assert obs["pixels"]["cam_gray"].shape == (8, 10, 3) and np.all(obs["pixels"]["cam_gray"] == 200)
    assert env.observation_space.contains(obs)


def test_listed_state_and_cameras_are_the_whole_mapping_in_order() -> None:
    env = adapt(obs_map=ObsMapConfig(state=("goal", "arm.q"), cameras={"front": "cam_chw"}))
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs["state"], [0.5, -0.5, 0, 0, 0])
    assert list(obs["pixels"]) == ["front"]


def test_actions_are_scaled_from_minus_one_one_and_success_and_interventions_mapped() -> None:
    env = adapt(success_key="done_ok", intervention_key="human", executed_action_key="human_action")
    assert env.action_space == gym.spaces.Box(-1, 1, (2,), np.float32) and action_dim_of(env.action_space) == 2
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([-1.0, 1.0], np.float32))
    np.testing.assert_allclose(env.unwrapped.last_action, [0.0, 2.0])
    assert info["is_success"] is False and info["intervened"] is False
    _, _, _, _, info = env.step(np.array([0.0, 0.0], np.float32))
    np.testing.assert_allclose(env.unwrapped.last_action, [5.0, 0.0])
    assert info["intervened"] is True
    np.testing.assert_allclose(info["executed_action"], [1.0, 0.0])  # the human's action, back in [-1, 1]
    _, _, terminated, _, info = env.step(np.zeros(2, np.float32))
    assert terminated and info["is_success"] is True


def test_lerobot_style_flat_and_nested_keys_map_alike() -> None:
    flat = gym.spaces.Dict({"observation.state": gym.spaces.Box(-1, 1, (4,)),
                            "observation.images.top": gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)})
    nested = gym.spaces.Dict({"observation": gym.spaces.Dict({
        "state": gym.spaces.Box(-1, 1, (4,)),
        "images": gym.spaces.Dict({"top": gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)})})})
    from robot_rl.envs.adapter import ObsMapper

    for space in (flat, nested):
        mapper = ObsMapper(space, ObsMapConfig())
        assert mapper.state_keys == ["observation.state"] and set(mapper.cameras) == {"top"}
        obs = mapper(space.sample())
        assert obs["state"].shape == (4,) and obs["pixels"]["top"].shape == (16, 16, 3)


def test_render_of_several_cameras_is_tiled_side_by_side() -> None:
    frame = adapt().render()
    assert frame.shape == (6, 7, 3)  # heights padded to the tallest, widths added
    assert tile_frames({"b": np.zeros((2, 2)), "a": np.ones((2, 3, 3))}).shape == (2, 5, 3)
    assert tile_frames(np.zeros((3, 3, 3))).shape == (3, 3, 3)


@pytest.mark.parametrize("fields, field_name", [
    ({"obs_map": ObsMapConfig(state=("arm.nope",))}, "env.obs_map"),
    ({"obs_map": ObsMapConfig(cameras={"c": "goal"})}, "env.obs_map.cameras.c"),
    ({"obs_map": ObsMapConfig(preset="box")}, "env.obs_map"),
])
def test_bad_mappings_name_the_field(fields, field_name) -> None:
    with pytest.raises(ValueError, match=field_name.replace(".", r"\.")):
        adapt(**fields)


def test_pipeline_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"env\.id: cannot make 'NoSuchEnv-v0'"):
        make_env(EnvConfig(id="NoSuchEnv-v0"))
    with pytest.raises(ValueError, match=r"env\.id: 'CartPole-v1' has action space Discrete"):
        make_env(EnvConfig(id="CartPole-v1"))
    with pytest.raises(ValueError, match=r"env\.imports\[0\]: no such file"):
        make_env(EnvConfig(id="Pendulum-v1", imports=("/nonexistent/mod.py",)))
    with pytest.raises(ValueError, match=r"env\.wrappers\[0\]"):
        make_env(EnvConfig(id="Pendulum-v1", wrappers=(WrapperConfig(target="gymnasium.wrappers:NoSuchWrapper"),)))
    with pytest.raises(ValueError, match=r"env\.kwargs"):
        make_env(EnvConfig(id="Pendulum-v1", kwargs={"no_such_keyword": 1}))


def test_an_env_class_registered_nowhere_is_made_by_module_and_class() -> None:
    env = make_env(EnvConfig(id="tests.envs.test_adapter:Foreign", max_episode_steps=2))
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
    _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
    assert truncated and not terminated  # the time limit of 2 steps came first
