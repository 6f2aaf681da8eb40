"""The algorithm contract: what the learner, the actor, the Ray gateway, evaluation and checkpoints may ask of an
agent. Nothing in the runtime touches an agent's networks, optimizers or config fields beyond this.

An agent is a class with

* ``name`` (class attribute): what ``agent.name`` selects in a config (``sac``, ``bc``, or ``module:Class``);
* ``config_class`` (class attribute): a dataclass deriving from :class:`AgentConfig`, every field documented;
* ``__init__(obs_spec, action_dim, cfg, seed)``: builds everything, seeded only from ``seed`` (the global torch
  RNG is left alone);
* ``check_spaces(obs_spec, action_dim, cfg)`` (classmethod): raises ``ValueError`` for spaces it cannot handle, so a
  run fails before any process starts;
* ``sampling(cfg)`` (classmethod): :class:`Sampling`, what the learner draws from the replay for one ``update``;
* ``act``, ``update``, ``prepare``, ``policy_state`` / ``load_policy_state`` and ``state_dict`` /
  ``load_state_dict`` as in :class:`Agent` below;
* optional capabilities, each a class attribute ``True`` where the agent has it (:class:`Capabilities`: ``uses_base``,
  ``trains_base``, ``keeps_acting_state``, ``exportable``); the registry checks that a class has what it declares,
  and the runtime reads the declarations (:func:`capabilities`), never probes for methods.

Agents are usable without any process or transport: ``agent.update(replay.sample(...))`` is a training step.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from robot_rl.spaces import ObsSpec
from robot_rl.utils.imports import import_object

if TYPE_CHECKING:
    from robot_rl.replay.buffer import ReplayBuffer

Batch = Mapping[str, Any]
"""A sampled minibatch as an agent's ``update`` takes it: ``obs``, ``action``, ``reward``, ``next_obs``, ... (tensors
or nested dicts of them)."""


@dataclass(frozen=True)
class AgentConfig:
    """Fields every agent config has. Each agent's own config derives from this one."""

    name: str = "sac"
    """Which agent: a registered name (``sac``, ``bc``) or ``module:Class`` for an agent of your own."""
    device: str = "cpu"
    """Torch device of the learner ('cpu', 'cuda', 'cuda:1', ...). Actors act on the CPU unless this names a CUDA
    device and the actor's machine has one."""
    retired_fields: ClassVar[frozenset[str]] = frozenset()
    # Fields an earlier version of the config had that no longer mean anything: a saved run's config that lists them
    # still loads (robot_rl.config.from_dict drops them).

    def validate(self) -> None:
        """Raises ValueError naming the offending field (each agent's config adds its own checks)."""

    def require(self, checks: list[tuple[bool, str]]) -> None:
        """Raises ValueError with the message of the first ``(ok, message)`` that is not ok, naming the agent."""
        for ok, message in checks:
            if not ok:
                raise ValueError(f"agent config ({self.name}): {message}")

    @classmethod
    def resolve_config_class(cls, data: Mapping[str, Any]) -> type[AgentConfig]:
        """The config class of the agent ``data["name"]`` names (used when a config is read from YAML)."""
        return config_class(str(data.get("name", AgentConfig.name)))


@dataclass(frozen=True)
class Sampling:
    """What one ``update`` call consumes: ``replay.sample(batch_size, mix=mix, utd=utd)``.

    The learner's rate limiter makes one ``update`` call per env step past ``learning_starts``; ``utd`` is the
    number of gradient steps inside that call (so the update-to-data ratio is ``utd``)."""

    batch_size: int
    utd: int = 1
    mix: Mapping[str, float] | None = None
    """Groups and their shares (replay.mix when None); e.g. ``{"prior": 1.0}`` for demonstrations only."""
    n_step: int = 1
    """Transitions summed into each sample's reward (n-step returns; see ReplayBuffer.set_n_step)."""
    discount: float = 1.0
    """The discount of those sums (only read when ``n_step > 1``)."""
    pixels: bool = True
    """Whether samples carry the camera frames (False: the replay skips gathering them; an agent that reads only
    the state saves the largest copies)."""
    needs: tuple[str, ...] = field(default=())
    """Replay groups that must hold data before the first update (e.g. ``("prior",)`` for behaviour cloning);
    a run whose config cannot fill them fails before it starts."""


@runtime_checkable
class Agent(Protocol):
    """The methods the runtime calls. See the module docstring for the class attributes."""

    name: ClassVar[str]
    config_class: ClassVar[type[AgentConfig]]
    obs_spec: ObsSpec
    action_dim: int

    def act(self, obs: Mapping[str, Any], deterministic: bool = False) -> np.ndarray:
        """Action(s) in [-1, 1] for one observation (``state [D]``) or a batch (``state [N, D]``)."""
        ...

    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """One learning step on a batch from :meth:`ReplayBuffer.sample` (``[utd, B, ...]``); scalar metrics."""
        ...

    def prepare(self, replay: ReplayBuffer) -> None:
        """Called before every update while learning; a no-op after the first (e.g. fits a state normaliser once
        on the replay's contents). What it computes must be part of :meth:`state_dict`."""
        ...

    def policy_state(self) -> dict[str, torch.Tensor]:
        """What an actor needs to act, as flat CPU tensors (fixed names, shapes and dtypes for a given config)."""
        ...

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume learning exactly (networks, optimizers, generators, counters)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        ...


# ------------------------------------------------------------ optional capabilities
@dataclass(frozen=True)
class Capabilities:
    """The optional parts of the contract. An agent class declares each it has with a class attribute of the field's
    name set to True (``uses_base: ClassVar[bool] = True``); :func:`check_agent_class` checks that it has what goes
    with it, and the runtime reads them through :func:`capabilities`."""

    uses_base: bool = False
    """The agent acts on a base (generalist) policy's proposals: the run must name one (``base_policy.path``), and
    the actor adds the proposal for each env to the observation ``act`` gets (``base_action [N, A]``,
    ``chunk_index [N]``; see robot_rl.agents.base_rollout). The replay stores them per transition (``base_action``,
    ``next_base_action``, ``chunk_index``, ``next_chunk_index`` in a sample)."""
    trains_base: bool = False
    """The agent fine-tunes the base's own weights (with ``uses_base``): it is built with the loaded base
    (``__init__(..., base=...)``; a run loads its ``base_policy.path``, which it also writes into the config's
    ``base_path`` field: TrainConfig.agent_config, robot_rl.training.agents.build_agent), ``base_weights()`` returns
    the weights (an actor loads them into the base its executors run) and ``base_policy()`` is the base evaluation
    acts with."""
    keeps_acting_state: bool = False
    """``act`` keeps memory between an env's steps in the attribute ``acting_state`` (ibrl's held choices, annotated
    on the class); the actor's two policy copies hand it over when new weights are swapped in, so it follows the
    envs, not the weights."""
    exportable: bool = False
    """``deterministic_module()`` returns the deterministic action as one ``obs -> action`` module (robot_rl.deploy
    exports it)."""
    episodic: bool = False
    """``begin_episode(info)`` is called after every reset in evaluation (the per-episode state of a base policy's
    executor: robot_rl.policies.evaluate)."""


NEEDS = {"trains_base": ("base_weights", "base_policy"), "exportable": ("deterministic_module",),
         "episodic": ("begin_episode",)}
"""The methods a class declaring a capability must have."""


def capabilities(cls: type) -> Capabilities:
    """The capabilities ``cls`` declares (its class attributes named like :class:`Capabilities`' fields)."""
    return Capabilities(**{f.name: getattr(cls, f.name, False) is True for f in dataclasses.fields(Capabilities)})


def check_capabilities(cls: type, what: str) -> None:
    """Raises ValueError where ``cls`` declares a capability without what goes with it."""
    caps = capabilities(cls)
    missing = [f"{m}() ({flag})" for flag, methods in NEEDS.items() if getattr(caps, flag)
               for m in methods if not callable(getattr(cls, m, None))]
    if caps.trains_base and not caps.uses_base:
        missing.append("uses_base (trains_base)")
    config = getattr(cls, "config_class", None)
    if caps.trains_base and dataclasses.is_dataclass(config) and "base_path" not in {
            f.name for f in dataclasses.fields(config)}:
        missing.append("a base_path field in its config (trains_base)")
    if caps.trains_base and "base" not in inspect.signature(cls.__init__).parameters:
        missing.append("a base= argument to __init__ (trains_base)")
    if caps.keeps_acting_state and not any("acting_state" in vars(k).get("__annotations__", {}) for k in cls.__mro__):
        missing.append("an acting_state annotation (keeps_acting_state)")
    if missing:
        raise ValueError(f"{what} declares capabilities it lacks: {', '.join(missing)} (see robot_rl.agents.base)")


# --------------------------------------------------------------- agents by name
# The name lookup lives beside AgentConfig: AgentConfig.resolve_config_class needs it, and it checks classes against
# AgentConfig. robot_rl.agents.registry (make_agent) re-exports it.
BUILTIN = {
    "sac": "robot_rl.agents.sac:SACAgent",
    "bc": "robot_rl.agents.behavior_cloning:BCAgent",
    "base": "robot_rl.agents.base_rollout:BaseRolloutAgent",
    "residual": "robot_rl.agents.residual:ResidualAgent",
    "ibrl": "robot_rl.agents.ibrl:IBRLAgent",
    "critic_guided": "robot_rl.agents.critic_guided:CriticGuidedAgent",
    "wsrl": "robot_rl.agents.wsrl:WSRLAgent",
}
_registered: dict[str, type] = {}

REQUIRED = ("act", "update", "prepare", "policy_state", "load_policy_state", "state_dict", "load_state_dict",
            "check_spaces", "sampling")


def register_agent(cls: type, name: str | None = None) -> type:
    """Makes ``cls`` selectable as ``agent.name: <name>`` (default ``cls.name``); usable as a decorator."""
    check_agent_class(cls, repr(cls))
    _registered[name or cls.name] = cls
    return cls


def registered_names() -> list[str]:
    return sorted({*BUILTIN, *_registered})


def check_agent_class(cls: Any, what: str) -> None:
    missing = [m for m in REQUIRED if not callable(getattr(cls, m, None))]
    config = getattr(cls, "config_class", None)
    if missing:
        raise ValueError(f"{what} is not an agent: it lacks {', '.join(missing)} (see robot_rl.agents.base)")
    if not (isinstance(config, type) and issubclass(config, AgentConfig)):
        raise ValueError(f"{what}: config_class must be a dataclass deriving from robot_rl.agents.base.AgentConfig")
    check_capabilities(cls, what)


def agent_class(name: str) -> type:
    """The class ``agent.name`` selects; ``ValueError`` naming the known agents otherwise."""
    if name in _registered:
        return _registered[name]
    if name in BUILTIN:
        cls = import_object(BUILTIN[name], "agent")
        check_agent_class(cls, f"agent {name!r}")
        return cls
    if ":" not in name:
        raise ValueError(f"unknown agent {name!r}; registered: {', '.join(registered_names())}, or give "
                         "'module:Class' for an agent of your own")
    cls = import_object(name, "agent")
    check_agent_class(cls, f"agent {name!r}")
    return cls


def config_class(name: str) -> type[AgentConfig]:
    return agent_class(name).config_class


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A private generator: agents draw their randomness from these, never from the global torch RNG."""
    return torch.Generator(device=device).manual_seed(int(seed) & 0xFFFF_FFFF_FFFF)


def keep_global_rng() -> Any:
    """``with keep_global_rng(): build modules``: torch's default initialisers draw from the global RNG before
    :func:`~robot_rl.agents.networks.init_parameters` redraws them from the agent's seed; this puts the global
    state back, so building an agent never changes what other code draws."""
    return torch.random.fork_rng(devices=[])


def to_torch(tree: Any, device: torch.device) -> Any:
    """numpy/tensor tree -> tensor tree on ``device`` (bool arrays become float for the losses)."""
    if isinstance(tree, Mapping):
        return {k: to_torch(v, device) for k, v in tree.items()}
    if isinstance(tree, np.ndarray) and not tree.flags.writeable:
        tree = tree.copy()  # torch warns on sharing a read-only buffer (e.g. a labelled demo's proposals)
    t = torch.as_tensor(tree)
    if t.dtype == torch.bool:
        t = t.float()
    return t.to(device, non_blocking=True)


def index_tree(tree: Any, i: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: index_tree(v, i) for k, v in tree.items()}
    return tree[i]


def obs_batch(obs: Mapping[str, Any], device: torch.device) -> tuple[dict[str, Any], bool]:
    """An observation (``state [D]``) or a batch (``state [N, D]``) as a tensor batch, and whether it was one."""
    single = np.ndim(obs["state"]) == 1
    tobs = to_torch(obs, device)
    if single:
        tobs = index_tree(tobs, None)
    return tobs, single


def utd_batch(batch: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """A replay sample as tensors with a leading utd axis (a ``[B, ...]`` sample becomes ``[1, B, ...]``)."""
    tb = to_torch(batch, device)
    return index_tree(tb, None) if tb["action"].dim() == 2 else tb
