"""Which environment a run uses and how it is adapted to the robot_rl contract, all by config (no user code in
the project): the env id, modules to import for registration, your own wrappers, the observation mapping, and the
``info`` keys your env reports success and human interventions under."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from robot_rl.config import JsonDict, _json_arg, from_dict
from robot_rl.utils.imports import absolute_imports


@dataclass(frozen=True)
class WrapperConfig:
    """One wrapper of your own, applied right after the env is made (before robot_rl adapts it)."""

    target: str
    """``module:Class`` of a ``gymnasium.Wrapper`` (or any callable ``env -> env``)."""
    kwargs: JsonDict = field(default_factory=dict)
    """Keyword arguments for it."""


def _wrappers(value: list[Any]) -> tuple[WrapperConfig, ...]:
    return tuple(from_dict(WrapperConfig, {"target": v} if isinstance(v, str) else v, f"env.wrappers[{i}]")
                 for i, v in enumerate(value))


WrapperList = Annotated[tuple[WrapperConfig, ...], _json_arg(list, _wrappers, (list, tuple))]
"""On the command line: ``--env.wrappers '[{"target": "my_module:MyWrapper", "kwargs": {"k": 1}}]'``."""


@dataclass(frozen=True)
class ObsMapConfig:
    """How the env's observation becomes ``{"state": float32 [D], "pixels": {camera: uint8 [H, W, 3]}}``.

    Keys name entries of the observation; a nested Dict's entries are named with dots (``agent.qpos``), so a
    LeRobot-style flat key such as ``observation.images.top`` and the same nesting read alike."""

    preset: Literal["auto", "robot_rl", "box", "lerobot", "custom"] = "auto"
    """auto: a Box becomes ``state``; a robot_rl Dict stays as it is; LeRobot keys (``observation.state``,
    ``observation.images.<cam>``) are mapped; any other Dict maps its 1-D entries (sorted by key) to ``state`` and
    its image entries to cameras. robot_rl / box / lerobot: that mapping only. custom: ``state`` and ``cameras``
    below. Whenever ``state`` or ``cameras`` is given, the mapping is exactly what they list."""
    state: tuple[str, ...] = ()
    """Observation keys whose values (flattened, as float32) form ``state``, in this order."""
    cameras: JsonDict = field(default_factory=dict)
    """Camera name -> observation key of an image (uint8 or float in [0, 1]; HWC, CHW or grayscale)."""


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to run and how it is adapted (make -> your wrappers -> observation adapter)."""

    id: str = "Pendulum-v1"
    """A gymnasium id (``robot_rl/<Task>-v0`` for the sim tasks, ``HalfCheetah-v5``, an id a module in ``imports``
    registers, gymnasium's ``module:Id``), or ``module:Class`` of an env class that is registered nowhere."""
    kwargs: JsonDict = field(default_factory=dict)
    """Keyword arguments for the env's constructor (``gymnasium.make``); JSON on the command line."""
    max_episode_steps: int | None = None
    """Override the env's time limit (None keeps the registered one)."""
    imports: tuple[str, ...] = ()
    """Modules imported before the env is made (e.g. the one that registers its id): module names, or ``.py``
    files (relative to the config file, else to the working directory; a file's folder also goes on the import
    path, so ``file_stem:Name`` references resolve). Every process of the run and ``robot-rl eval`` import them."""
    wrappers: WrapperList = ()
    """Your wrappers, applied in order right after the env is made: ``[{target: module:Class, kwargs: {...}}]``
    (a bare ``module:Class`` string is fine in YAML)."""
    obs_map: ObsMapConfig = field(default_factory=ObsMapConfig)
    """How the observation maps to the robot_rl contract."""
    success_key: str = "is_success"
    """``info`` key under which the env reports task success (bool) at the end of an episode."""
    intervention_key: str = ""
    """``info`` key (bool) an env with a teleop device of its own sets on steps a human drove; empty = none."""
    executed_action_key: str = ""
    """``info`` key of the action the env really executed (in the env's action units) on such steps."""
    instruction_key: str = ""
    """Observation entry (a ``gymnasium.spaces.Text``) holding the episode's language instruction; empty = the
    first Text entry named instruction / language_instruction / task / prompt, if any."""
    instruction: str = ""
    """A fixed instruction for an env that reports none (e.g. "pick up the cube"); empty = none."""
    instruction_encoder: str = "hash"
    """How an instruction becomes the float32 embedding the replay, the network and agents see: ``hash`` (64-d,
    built in), ``hash:<dim>`` or ``minilm`` (384-d all-MiniLM-L6-v2, the ``language`` extra). See robot_rl.text."""

    @classmethod
    def prepare_raw(cls, data: dict[str, Any], base: Path) -> dict[str, Any]:
        """YAML data before conversion: ``imports`` files made absolute against the YAML's folder."""
        if isinstance(data.get("imports"), list):
            data = {**data, "imports": absolute_imports([str(e) for e in data["imports"]], base)}
        return data

    def validate(self) -> None:
        if not self.id:
            raise ValueError("env.id must name an environment")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"env.max_episode_steps must be >= 1 or null, got {self.max_episode_steps}")
        if bool(self.intervention_key) != bool(self.executed_action_key):
            raise ValueError("env.intervention_key and env.executed_action_key go together: set both or neither")
        if self.obs_map.preset == "custom" and not (self.obs_map.state or self.obs_map.cameras):
            raise ValueError("env.obs_map: preset 'custom' needs env.obs_map.state and/or env.obs_map.cameras")
        kind, _, arg = self.instruction_encoder.partition(":")
        if not ((kind == "hash" and (not arg or arg.isdigit())) or self.instruction_encoder == "minilm"):
            raise ValueError(f"env.instruction_encoder: {self.instruction_encoder!r} is not 'hash', 'hash:<dim>' "
                             "or 'minilm'")
        for i, w in enumerate(self.wrappers):
            if ":" not in w.target:
                raise ValueError(f"env.wrappers[{i}].target: {w.target!r} is not of the form 'module:Class'")
