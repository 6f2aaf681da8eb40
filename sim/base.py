"""Base class of every MuJoCo task: the robot_rl observation/action contract, action checks, fixed-rate
control with physics sub-steps, lean offscreen rendering, domain randomisation and success bookkeeping.

A task subclass provides the model XML and five hooks: ``_reset_task``, ``_apply_action``, ``_state``,
``_evaluate`` (reward, success, failure) and optionally ``_expert_state`` for scripted experts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering without a display; must precede `import mujoco`

import gymnasium as gym  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from robot_rl_sim.randomization import DomainRandomizer, RandomizationConfig  # noqa: E402

TEXT_CHARSET = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:'-!?")


@dataclass
class TaskConfig:
    """Fields common to all sim tasks; task configs subclass this."""

    image_size: int = 0
    """Side of the square camera images in pixels; 0 = state-only observations (no rendering)."""
    cameras: tuple[str, ...] = ()
    """Cameras rendered into obs['pixels'] when image_size > 0 (task default when empty)."""
    control_hz: float = 20.0
    """Rate of env.step (policy actions per simulated second)."""
    max_episode_steps: int = 100
    """Time limit in control steps (truncation)."""
    dense_reward: bool = False
    """Shaped reward for debugging; the default sparse reward is 1 on success, else 0."""
    terminate_on_success: bool = True
    """End the episode (terminated=True) when the task succeeds."""
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    """Domain randomisation (all off by default)."""
    instruction: bool = False
    """Add the episode's language instruction (text) to the observation as ``instruction`` (tasks whose
    instruction decides what to do, like PickColor, always have it)."""


class MujocoTaskEnv(gym.Env):
    """gymnasium.Env over one MuJoCo model. Observations: ``{"state": float32 [D], "pixels": {cam: uint8}}``;
    actions: float32 [A] in [-1, 1]; ``info["is_success"]`` on every step."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}
    default_cameras: tuple[str, ...] = ()
    instruction_text = ""
    """The task's language instruction (a task whose instruction changes per episode overrides
    :meth:`instruction`)."""
    needs_instruction = False
    """True when the instruction decides what to do: the observation always carries it."""

    def __init__(self, xml: str, cfg: TaskConfig, action_dim: int, render_mode: str | None = None) -> None:
        self.cfg = cfg
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": int(round(cfg.control_hz))}
        self.n_substeps = max(1, int(round(1.0 / (cfg.control_hz * self.model.opt.timestep))))
        self.cameras = tuple(cfg.cameras) or self.default_cameras
        for cam in self.cameras:
            if mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, cam) < 0:
                raise ValueError(f"cameras: {cam!r} is not a camera of this task (has {self._camera_names()})")
        self.randomizer = DomainRandomizer(self.model, cfg.randomization)
        self._renderer: mujoco.Renderer | None = None
        self._render_size = 0
        self.action_space = gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)
        mujoco.mj_forward(self.model, self.data)
        spaces: dict[str, gym.Space] = {"state": gym.spaces.Box(-np.inf, np.inf, self._state().shape, np.float32)}
        if cfg.image_size > 0:
            size = (cfg.image_size, cfg.image_size, 3)
            spaces["pixels"] = gym.spaces.Dict({c: gym.spaces.Box(0, 255, size, np.uint8) for c in self.cameras})
        self.with_instruction = bool(cfg.instruction or self.needs_instruction)
        if self.with_instruction:
            spaces["instruction"] = gym.spaces.Text(max_length=256, charset=TEXT_CHARSET)
        self.observation_space = gym.spaces.Dict(spaces)
        self.time_limit: int | None = None
        """Set by robot_rl's make_env from ``env.max_episode_steps``: replaces ``cfg.max_episode_steps`` (so a
        config's limit, longer or shorter, is the one the task counts; a person recording demos lifts it)."""
        self.steps = 0
        self.rejected_actions = 0

    # --------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self.randomizer.reset(self.model, self.np_random)
        self._reset_task(self.np_random)
        mujoco.mj_forward(self.model, self.data)
        self.steps = 0
        return self._obs(), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        action = np.asarray(action, dtype=np.float32)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action shape {action.shape} != {self.action_space.shape}")
        if not np.all(np.isfinite(action)):  # never pass NaN/inf on: hold instead
            self.rejected_actions += 1
            action = self._hold_action()
        action = self.randomizer.delay(np.clip(action, -1.0, 1.0), self._hold_action)
        self._apply_action(action)
        self.steps += 1
        reward, success, failure = self._evaluate()
        terminated = bool(failure or (success and self.cfg.terminate_on_success))
        truncated = bool(self.steps >= (self.time_limit or self.cfg.max_episode_steps) and not terminated)
        info = {"is_success": bool(success), "rejected_actions": self.rejected_actions}
        return self._obs(), float(reward), terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        size = max(self.cfg.image_size, 256)
        return self.render_camera(self.cameras[0] if self.cameras else self.default_cameras[0], size)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # --------------------------------------------------------------- helpers
    def render_camera(self, camera: str, size: int, data: mujoco.MjData | None = None) -> np.ndarray:
        """uint8 ``[size, size, 3]`` from ``camera`` with the lean visual setup (no shadows/reflections), of ``data``
        (another state of this model; default: the env's). Call it from one thread only: its GL context is made in
        the first caller's."""
        if self._renderer is None or self._render_size != size:
            if self._renderer is not None:
                self._renderer.close()
            self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, size)
            self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, size)
            self.model.vis.quality.offsamples = 0
            self._renderer = mujoco.Renderer(self.model, size, size)
            flags = self._renderer.scene.flags
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
                         mujoco.mjtRndFlag.mjRND_SKYBOX):
                flags[flag] = False
            self._render_size = size
        self._renderer.update_scene(self.data if data is None else data, camera=camera)
        return self._renderer.render()

    def _obs(self) -> dict[str, Any]:
        obs: dict[str, Any] = {"state": self.randomizer.noisy_state(self._state().astype(np.float32), self.np_random)}
        if self.cfg.image_size > 0:
            obs["pixels"] = self.randomizer.late_images(
                {c: self.randomizer.colour(self.render_camera(c, self.cfg.image_size)).copy() for c in self.cameras})
        if self.with_instruction:
            obs["instruction"] = self.instruction()
        return obs

    def instruction(self) -> str:
        """This episode's language instruction."""
        return self.instruction_text

    def _camera_names(self) -> list[str]:
        return [mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(self.model.ncam)]

    def hold_action(self) -> np.ndarray:
        """The action that keeps the robot still (teleop: what runs while paused or a device is gone)."""
        return self._hold_action()

    # ------------------------------------------------------------- task hooks
    def _hold_action(self) -> np.ndarray:
        """The action that keeps the robot where it is (used for rejected actions and an empty delay line)."""
        return np.zeros(self.action_space.shape, np.float32)

    def _reset_task(self, rng: np.random.Generator) -> None:
        """Sets the initial state (robot home, randomised object poses) in ``self.data``."""
        raise NotImplementedError

    def _apply_action(self, action: np.ndarray) -> None:
        """Applies one control-period action: sets controls and advances ``self.n_substeps`` physics steps."""
        raise NotImplementedError

    def _state(self) -> np.ndarray:
        """The proprioceptive ``state`` vector (what a real robot could measure)."""
        raise NotImplementedError

    def _evaluate(self) -> tuple[float, bool, bool]:
        """(reward, success, failure) of the current state."""
        raise NotImplementedError
