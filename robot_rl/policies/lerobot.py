"""LeRobot policies (ACT, Diffusion, SmolVLA, pi0, ...) as base policies, for users who have ``lerobot`` installed.

robot_rl does not depend on lerobot (an optional neighbour: it installs beside robot_rl, see the lowest-versions CI
leg), so the adapter is duck-typed on LeRobot's policy interface:

* the policy: ``predict_action_chunk(batch) -> Tensor [B, H, A]`` (or only ``select_action(batch) -> [B, A]``,
  then the chunk has one action), ``reset()``, and a ``config`` with ``image_features`` (name -> feature with
  ``shape`` ``(3, H, W)``), ``robot_state_feature`` and ``action_feature`` (features with ``shape``) and
  ``chunk_size`` / ``n_action_steps``;
* a policy that conditions on a history of observations (``config.n_obs_steps`` > 1: Diffusion, VQ-BeT) keeps it
  in queues that only ``select_action`` fills, once per control step: such a policy is stepped as LeRobot's own
  loop steps it, one ``select_action`` per observation (a chunk of one action; the policy replays its own
  action queue in between);
* the processors from ``lerobot.policies.factory.make_pre_post_processors(policy.config, path)``: the
  preprocessor takes the observation frame (``observation.state`` float [1, D], ``observation.images.<cam>`` float
  [1, 3, H, W] in [0, 1], ``task`` [text]) and returns the policy's batch (normalised, on its device); the
  postprocessor un-normalises the actions.

Frames of another size than the policy's image features are resized (bilinear, antialiased). Actions come back in
the robot's units: give their bounds (``action_low`` / ``action_high`` metadata) so they map to robot_rl's
[-1, 1]. Tested against a stand-in class with this interface (tests/policies/test_lerobot.py) and against
LeRobot's own ACT and Diffusion classes where lerobot is installed (tests/policies/test_lerobot_classes.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from robot_rl.policies.base import PolicyMetadata, check_chunk

IMAGE_PREFIX = "observation.images."


def _shape(feature: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in (feature.shape if hasattr(feature, "shape") else feature["shape"]))


class LeRobotPolicy:
    """A LeRobot policy object (+ its processors) as a :class:`~robot_rl.policies.base.BasePolicy`."""

    def __init__(self, policy: Any, preprocessor: Callable | None = None, postprocessor: Callable | None = None,
                 camera_map: Mapping[str, str] | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        """``camera_map``: robot_rl camera name -> LeRobot image key (default: ``front`` -> ``observation.images.
        front``); ``metadata``: PolicyMetadata fields to set or override (``control_hz``, ``action_low``, ...)."""
        self.policy, self.pre, self.post = policy, preprocessor, postprocessor
        cfg = policy.config
        images = {k: _shape(v) for k, v in (getattr(cfg, "image_features", None) or {}).items()}
        self.camera_map = dict(camera_map) if camera_map else {
            k[len(IMAGE_PREFIX):] if k.startswith(IMAGE_PREFIX) else k: k for k in images}
        unknown = set(self.camera_map.values()) - set(images)
        if unknown:
            raise ValueError(f"LeRobot policy has no image feature(s) {sorted(unknown)} (has {sorted(images)})")
        state = getattr(cfg, "robot_state_feature", None)
        action = getattr(cfg, "action_feature", None)
        if action is None:
            raise ValueError("LeRobot policy config has no action_feature")
        # stepped through select_action: policies with an observation history, or without chunk prediction
        self.stepped = int(getattr(cfg, "n_obs_steps", 1) or 1) > 1 or not hasattr(policy, "predict_action_chunk")
        horizon = 1 if self.stepped else int(getattr(cfg, "n_action_steps", 0) or getattr(cfg, "chunk_size", 0) or 1)
        base = {"action_dim": _shape(action)[0], "chunk_length": horizon,
                "state_dim": _shape(state)[0] if state is not None else 0,
                "cameras": {name: (images[key][1], images[key][2], images[key][0])
                            for name, key in self.camera_map.items()},
                "name": type(policy).__name__}
        self.metadata = PolicyMetadata.from_dict({**base, **dict(metadata or {})})
        self.device = next(iter(policy.parameters())).device if hasattr(policy, "parameters") else torch.device("cpu")

    def _frame(self, obs: Mapping[str, Any], instruction: str) -> dict[str, Any]:
        """The observation as LeRobot's recording loop hands it to a preprocessor (a batch of one)."""
        frame: dict[str, Any] = {"task": [instruction]}
        if self.metadata.state_dim:
            frame["observation.state"] = torch.as_tensor(np.asarray(obs["state"], np.float32))[None]
        for name, key in self.camera_map.items():
            img = torch.as_tensor(np.ascontiguousarray(obs["pixels"][name])).permute(2, 0, 1).float().div(255.0)[None]
            size = self.metadata.cameras[name][:2]
            if tuple(img.shape[-2:]) != size:
                img = torch.nn.functional.interpolate(img, size=size, mode="bilinear", antialias=True,
                                                      align_corners=False).clamp_(0.0, 1.0)
            frame[key] = img
        return frame

    @torch.no_grad()
    def infer(self, obs: Mapping[str, Any], instruction: str = "", noise: np.ndarray | None = None) -> np.ndarray:
        batch = self._frame(obs, instruction)
        batch = self.pre(batch) if self.pre is not None else {
            k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        if self.stepped:
            actions = self.policy.select_action(batch)[:, None]
        else:
            actions = self.policy.predict_action_chunk(batch)[:, : self.metadata.chunk_length]
        if self.post is not None:
            actions = self.post(actions)
        return check_chunk(torch.as_tensor(actions).float().cpu().numpy(), self.metadata, self.metadata.name)

    def reset(self) -> None:
        if hasattr(self.policy, "reset"):
            self.policy.reset()

    def close(self) -> None:
        pass


def load_lerobot_policy(path: str, policy_type: str, metadata: Mapping[str, Any] | None = None,
                        device: str = "cpu") -> LeRobotPolicy:
    """A pretrained LeRobot policy folder (``lerobot:<type>:<path>`` in ``base_policy.path``), with its processors.
    Needs ``lerobot`` installed."""
    try:
        # optional: lerobot (installed beside robot_rl)
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as exc:
        if importlib.util.find_spec("lerobot") is not None:
            raise ValueError(f"lerobot is installed but does not import here: {exc}") from None
        raise ValueError("base_policy.path names a LeRobot policy but lerobot is not installed (pip install lerobot "
                         "here, or in an environment of its own with `python -m robot_rl.policies.serve "
                         "lerobot:<type>:<folder>` there and base_policy.path ws://HOST:PORT here)") from None
    # LeRobot prints while loading: keep stdout for what robot_rl's commands print there (eval's JSON)
    with contextlib.redirect_stdout(sys.stderr):
        policy = get_policy_class(policy_type).from_pretrained(path).to(device).eval()
        pre, post = make_pre_post_processors(policy.config, path,
                                             preprocessor_overrides={"device_processor": {"device": device}})
    return LeRobotPolicy(policy, pre, post, metadata=metadata)
