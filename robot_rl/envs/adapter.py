"""The contract adapter: any gymnasium env as robot_rl sees it.

* observation -> ``{"state": float32 [D], "pixels": {camera: uint8 [H, W, 3]}}`` (:class:`ObsMapper`, by
  ``env.obs_map``);
* action space -> float32 Box in [-1, 1] (affine to the env's bounds);
* ``info`` -> the contract's keys (``env.success_key``, ``env.intervention_key``, ``env.executed_action_key``);
* an instruction (a Text entry of the observation, or ``env.instruction``) -> ``instruction``, its float32
  embedding (``env.instruction_encoder``), in the observation, and its text in ``info["instruction"]``;
* ``render()`` returning several frames (a list, a tuple or a dict of cameras) -> one frame, tiled side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.envs import contract
from robot_rl.envs.config import EnvConfig, ObsMapConfig
from robot_rl.text import make_text_encoder
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


def flatten_space(space: gym.Space, prefix: str = "") -> dict[str, gym.Space]:
    """Leaves of a (nested) Dict space by dotted key; a non-Dict space is the one leaf ``""``."""
    if not isinstance(space, gym.spaces.Dict):
        return {prefix: space}
    out: dict[str, gym.Space] = {}
    for key, sub in space.spaces.items():
        out.update(flatten_space(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def flatten_obs(obs: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of a (nested) dict observation by dotted key, as :func:`flatten_space` names them."""
    if not isinstance(obs, Mapping):
        return {prefix: obs}
    out: dict[str, Any] = {}
    for key, sub in obs.items():
        out.update(flatten_obs(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _image_layout(space: gym.Space) -> str | None:
    """'hwc' / 'chw' / 'gray' for an image-like Box, None otherwise."""
    if not isinstance(space, gym.spaces.Box):
        return None
    shape = space.shape
    if len(shape) == 3 and shape[-1] == 3 and shape[0] > 4:
        return "hwc"
    if len(shape) == 3 and shape[0] == 3 and shape[-1] > 4:
        return "chw"
    if len(shape) == 2 and min(shape) > 4 and (space.dtype == np.uint8):
        return "gray"
    if len(shape) == 3 and shape[-1] == 1 and shape[0] > 4:
        return "gray"
    return None


class _Camera:
    """Converts one image entry to uint8 ``[H, W, 3]``."""

    def __init__(self, key: str, space: gym.Space, where: str) -> None:
        layout = _image_layout(space)
        if layout is None:
            raise ValueError(f"{where}: {key!r} is not an image (shape {getattr(space, 'shape', None)}); cameras need "
                             "[H, W, 3], [3, H, W] or [H, W] arrays")
        self.key, self.layout = key, layout
        self.scale = 255.0 if space.dtype != np.uint8 and np.all(np.asarray(space.high) <= 1.0) else 1.0
        shape = space.shape
        self.shape = ((shape[1], shape[2], 3) if layout == "chw" else (shape[0], shape[1], 3))

    def __call__(self, value: Any) -> np.ndarray:
        img = np.asarray(value)
        if self.layout == "chw":
            img = img.transpose(1, 2, 0)
        elif self.layout == "gray":
            img = np.repeat(img.reshape(*img.shape[:2], 1), 3, axis=2)
        if img.dtype != np.uint8:
            img = np.clip(img * self.scale, 0, 255).astype(np.uint8)
        return np.ascontiguousarray(img)


class ObsMapper:
    """Maps one observation to the contract's Dict; built once from the env's observation space."""

    def __init__(self, space: gym.Space, cfg: ObsMapConfig, env: EnvConfig | None = None) -> None:
        """``env``: the env config's instruction settings (``instruction_key``, ``instruction``,
        ``instruction_encoder``); None = the defaults."""
        env = env or EnvConfig()
        leaves = flatten_space(space)
        listed = bool(cfg.state or cfg.cameras)  # what the user lists is the whole mapping
        state_keys, cameras = (list(cfg.state), dict(cfg.cameras)) if listed else self._preset(space, leaves, cfg)
        for key in [*state_keys, *cameras.values()]:
            if key not in leaves:
                raise ValueError(f"env.obs_map: the observation has no entry {key!r}; it has {sorted(leaves)}")
        self.state_keys = state_keys
        self.cameras = {name: _Camera(key, leaves[key], f"env.obs_map.cameras.{name}")
                        for name, key in sorted(cameras.items())}
        for key in state_keys:
            leaf = leaves[key]
            if not isinstance(leaf, gym.spaces.Box) or not np.issubdtype(leaf.dtype, np.number):
                raise ValueError(f"env.obs_map.state: {key!r} is not a numeric Box ({leaf})")
        self.instruction_key = self._instruction_key(leaves, env)
        self.fixed_instruction = "" if self.instruction_key else env.instruction
        self.text = None
        if self.instruction_key or self.fixed_instruction:
            try:
                self.text = make_text_encoder(env.instruction_encoder)
            except ValueError as exc:
                raise ValueError(f"env.instruction_encoder: {exc}") from None
        # A contract observation passes as it is, unless an instruction's text must become its embedding.
        self.identity = (cfg.preset in ("auto", "robot_rl") and self._is_contract(space) and not listed
                         and self.text is None)
        self.state_dim = int(sum(int(np.prod(leaves[k].shape)) for k in state_keys))
        if self.state_dim == 0 and not self.cameras:
            raise ValueError(f"env.obs_map: nothing maps to the observation (entries: {sorted(leaves)}); set "
                             "env.obs_map.state and/or env.obs_map.cameras")
        spaces: dict[str, gym.Space] = {"state": gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32)}
        if self.cameras:
            spaces["pixels"] = gym.spaces.Dict({n: gym.spaces.Box(0, 255, c.shape, np.uint8)
                                                for n, c in self.cameras.items()})
        if self.text is not None:
            spaces["instruction"] = gym.spaces.Box(-np.inf, np.inf, (self.text.dim,), np.float32)
        self.space = gym.spaces.Dict(spaces)

    @staticmethod
    def _instruction_key(leaves: dict[str, gym.Space], cfg: EnvConfig) -> str:
        texts = [k for k, s in leaves.items() if isinstance(s, gym.spaces.Text)]
        if cfg.instruction_key:
            if cfg.instruction_key not in texts:
                raise ValueError(f"env.instruction_key: the observation has no text entry {cfg.instruction_key!r} "
                                 f"(text entries: {texts or 'none'})")
            return cfg.instruction_key
        for name in ("instruction", "language_instruction", "task", "prompt"):
            if name in texts:
                return name
        return ""

    def instruction(self, obs: Any) -> str:
        """The instruction text of a raw observation ('' when the env has none)."""
        if self.instruction_key:
            return str(flatten_obs(obs)[self.instruction_key])
        return self.fixed_instruction

    @staticmethod
    def _is_contract(space: gym.Space) -> bool:
        if not isinstance(space, gym.spaces.Dict) or "state" not in space.spaces:
            return False
        pixels = space.spaces.get("pixels")
        text = space.spaces.get("instruction")
        if text is not None and not isinstance(text, gym.spaces.Text):
            return False
        return set(space.spaces) <= {"state", "pixels", "instruction"} and (
            pixels is None or all(_image_layout(s) == "hwc" and s.dtype == np.uint8 for s in pixels.spaces.values()))

    def _preset(self, space: gym.Space, leaves: dict[str, gym.Space],
                cfg: ObsMapConfig) -> tuple[list[str], dict[str, str]]:
        preset = cfg.preset
        lerobot = [k for k in leaves if k == "observation.state" or k.startswith("observation.image")]
        if preset == "custom":
            return [], {}
        if preset == "box" or (preset == "auto" and not isinstance(space, gym.spaces.Dict)):
            if not isinstance(space, gym.spaces.Box):
                raise ValueError(f"env.obs_map: preset 'box' needs a Box observation, got {space}")
            return [""], {}
        if preset == "robot_rl" or (preset == "auto" and self._is_contract(space)):
            if "state" not in leaves and not any(k.startswith("pixels.") for k in leaves):
                raise ValueError(f"env.obs_map: preset 'robot_rl' needs 'state' / 'pixels.<cam>', got {sorted(leaves)}")
            return [k for k in ("state",) if k in leaves], {k[7:]: k for k in leaves if k.startswith("pixels.")}
        if preset == "lerobot" or (preset == "auto" and lerobot):
            state = [k for k in ("observation.state", "observation.environment_state") if k in leaves]
            cams = {k.rsplit(".", 1)[-1]: k for k in leaves if k.startswith("observation.images.")}
            if "observation.image" in leaves:
                cams.setdefault("image", "observation.image")
            if not (state or cams):
                raise ValueError(f"env.obs_map: preset 'lerobot' found no observation.state / observation.images.* "
                                 f"(entries: {sorted(leaves)})")
            return state, cams
        # auto, any other Dict: 1-D numeric entries form the state (sorted by key), images are cameras.
        state = sorted(k for k, s in leaves.items() if isinstance(s, gym.spaces.Box) and len(s.shape) <= 1
                       and np.issubdtype(s.dtype, np.number))
        cams = {k.rsplit(".", 1)[-1]: k for k, s in leaves.items() if _image_layout(s) is not None}
        return state, cams

    def __call__(self, obs: Any) -> dict[str, Any]:
        if self.identity:
            return obs
        flat = flatten_obs(obs)
        parts = [np.asarray(flat[k], np.float32).reshape(-1) for k in self.state_keys]
        out: dict[str, Any] = {"state": np.concatenate(parts) if parts else np.zeros(0, np.float32)}
        if self.cameras:
            out["pixels"] = {n: c(flat[c.key]) for n, c in self.cameras.items()}
        if self.text is not None:
            out["instruction"] = self.text.encode(self.instruction(obs))
        return out

    def describe(self) -> str:
        cams = ", ".join(f"{n} <- {c.key}" for n, c in self.cameras.items()) or "none"
        return f"state [{self.state_dim}] <- {[k or '<box>' for k in self.state_keys]}; cameras: {cams}"


def tile_frames(frames: Any) -> np.ndarray | None:
    """One RGB frame from what ``render()`` returned: a frame, or a list / tuple / dict of frames side by side
    (bottom-padded to the tallest)."""
    if frames is None:
        return None
    if isinstance(frames, Mapping):
        frames = [frames[k] for k in sorted(frames)]
    if not isinstance(frames, (list, tuple)):
        return np.asarray(frames)
    imgs = [np.asarray(f) for f in frames if f is not None]
    if not imgs:
        return None
    imgs = [np.repeat(i[..., None], 3, axis=2) if i.ndim == 2 else i[..., :3] for i in imgs]
    height = max(i.shape[0] for i in imgs)
    padded = [np.pad(i, ((0, height - i.shape[0]), (0, 0), (0, 0))) for i in imgs]
    return np.concatenate(padded, axis=1).astype(np.uint8, copy=False)


class ContractAdapter(gym.Wrapper):
    """Observation, action, ``info`` and ``render`` of any env as robot_rl expects them (module docstring)."""

    def __init__(self, env: gym.Env, cfg: EnvConfig) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"env.id: {cfg.id!r} has action space {space}; robot_rl needs a 1-D continuous Box "
                             "(discrete or image actions are not supported)")
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
            raise ValueError(f"env.id: {cfg.id!r} has unbounded action dimensions (low={low}, high={high}); bound "
                             "them with a wrapper of your own (env.wrappers) so [-1, 1] can be scaled to them")
        self._low, self._half = low, (high - low) / 2.0
        self._identity_action = bool(np.all(low == -1) and np.all(high == 1))
        self.action_space = gym.spaces.Box(-1.0, 1.0, space.shape, np.float32)
        self.mapper = ObsMapper(env.observation_space, cfg.obs_map, cfg)
        self.observation_space = self.mapper.space
        self.cfg = cfg
        if not self.mapper.identity:  # a foreign Dict mapped by rule: show the user what became of it
            foreign = isinstance(env.observation_space, gym.spaces.Dict) and not ObsMapper._is_contract(
                env.observation_space)
            (log.info if foreign else log.debug)(
                "env %s: %s", cfg.id, self.mapper.describe())

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """[-1, 1] -> the env's own action units."""
        action = np.asarray(action, np.float32)
        if self._identity_action:
            return action
        return (self._low + (action.astype(np.float64) + 1.0) * self._half).astype(self.env.action_space.dtype)

    def from_env_action(self, action: Any) -> np.ndarray:
        """The env's units -> [-1, 1] (for an executed action the env reports)."""
        action = np.asarray(action, np.float64)
        if self._identity_action:
            return action.astype(np.float32)
        return np.clip((action - self._low) / self._half - 1.0, -1.0, 1.0).astype(np.float32)

    def _info(self, info: dict[str, Any], obs: Any) -> dict[str, Any]:
        cfg = self.cfg
        if self.mapper.text is not None:
            info = {**info, contract.INSTRUCTION: self.mapper.instruction(obs)}
        if cfg.success_key != contract.SUCCESS and cfg.success_key in info:
            info = {**info, contract.SUCCESS: bool(info[cfg.success_key])}
        if cfg.intervention_key and info.get(cfg.intervention_key) is not None:
            info = {**info, contract.INTERVENED: bool(info[cfg.intervention_key])}
            if info[contract.INTERVENED] and info.get(cfg.executed_action_key) is not None:
                info[contract.EXECUTED_ACTION] = self.from_env_action(info[cfg.executed_action_key])
        return info

    def reset(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self.mapper(obs), self._info(info, obs)

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self.to_env_action(action))
        return self.mapper(obs), float(reward), bool(terminated), bool(truncated), self._info(info, obs)

    def render(self) -> Any:
        return tile_frames(self.env.render())
