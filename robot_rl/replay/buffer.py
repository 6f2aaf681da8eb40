"""Replay buffer with partitions (online, demos, interventions) and RLPD-style mixed sampling.

Interventions are stored twice by design (HIL-SERL): in ``interventions`` (part of the prior data) and in
``online`` (they are also on-policy-ish experience). ``prior`` = demos plus interventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot_rl.config import JsonDict
from robot_rl.replay.rows import SOURCE_CODE, BlockBuilder
from robot_rl.replay.storage import RingStorage
from robot_rl.spaces import ObsSpec

PARTITIONS = ("online", "demos", "interventions")
ROUTES = {"online": [SOURCE_CODE["online"], SOURCE_CODE["intervention"]], "demos": [SOURCE_CODE["demo"]],
          "interventions": [SOURCE_CODE["intervention"]]}
"""The partitions each source goes to (interventions also to online, HIL-SERL)."""
GROUPS = {"online": ("online",), "prior": ("demos", "interventions"), "demos": ("demos",),
          "interventions": ("interventions",)}


@dataclass(frozen=True)
class ReplayConfig:
    """Sizes and sampling mix of the learner's replay buffer."""

    online_capacity: int = 1_000_000
    """Rows (≈ transitions) kept in the online partition."""
    demos_capacity: int = 100_000
    """Rows kept in the demonstrations partition."""
    interventions_capacity: int = 100_000
    """Rows kept in the human-interventions partition."""
    mix: JsonDict = field(default_factory=lambda: {"online": 0.5, "prior": 0.5})
    """Share of each batch per group: online, prior (= demos + interventions), demos, interventions.
    An empty group's share goes to the others (RLPD symmetric sampling = online 0.5, prior 0.5)."""

    def validate(self) -> None:
        for name in PARTITIONS:
            if getattr(self, f"{name}_capacity") < 2:
                raise ValueError(f"replay config: {name}_capacity must be >= 2")
        unknown = set(self.mix) - set(GROUPS)
        if unknown:
            raise ValueError(f"replay config: mix has unknown group(s) {sorted(unknown)}; use {sorted(GROUPS)}")
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in self.mix.values()):
            raise ValueError(f"replay config: mix weights must be numbers, got {dict(self.mix)}")
        if any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ValueError("replay config: mix weights must be >= 0 and sum to > 0")


def nest(flat: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """``{"obs/pixels/front": a}`` -> ``{"obs": {"pixels": {"front": a}}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


class ReplayBuffer:
    """Partitioned in-RAM replay. ``add`` routes by source; ``sample`` mixes partitions per batch."""

    def __init__(self, spec: ObsSpec, action_dim: int, cfg: ReplayConfig | None = None, seed: int = 0) -> None:
        """``seed``: the sampler's random generator (a run derives it from its seed: training/seeds.py)."""
        self.cfg = cfg = cfg or ReplayConfig()
        cfg.validate()
        self.spec, self.action_dim = spec, action_dim
        self.partitions = {name: RingStorage(spec, action_dim, getattr(cfg, f"{name}_capacity"))
                           for name in PARTITIONS}
        self.rng = np.random.default_rng(seed)
        self._one: BlockBuilder | None = None  # add()'s block of one transition
        self._out: dict[tuple[int, int, bool], dict[str, np.ndarray]] = {}
        self.with_pixels = True
        """Whether samples carry the camera frames; an agent that reads none turns them off (``Sampling.pixels``),
        which skips the largest gathers. ``sample(pixels=True)`` still asks for them."""

    @property
    def with_base(self) -> bool:
        """Whether samples carry the base policy's proposals (``base_action``, ``next_base_action``,
        ``chunk_index``, ``next_chunk_index``): on for runs with a base policy; off, samples skip four gathers."""
        return self.partitions["online"].base_fields

    @with_base.setter
    def with_base(self, value: bool) -> None:
        for part in self.partitions.values():
            part.base_fields = bool(value)
        self._out.clear()

    def set_n_step(self, n: int, discount: float) -> None:
        """Samples carry ``n``-step returns: ``reward`` is the discounted sum over up to ``n`` transitions of the
        episode, ``next_obs`` (and ``next_base_action``) the observation after them, ``terminated`` whether the
        episode ended inside, and ``discount`` the bootstrap factor ``discount ** k`` for the ``k`` transitions
        summed. ``n = 1`` (the default) is the plain one-step sample, without ``discount``."""
        if n < 1 or not 0.0 <= discount <= 1.0:
            raise ValueError(f"n-step sampling needs n >= 1 and discount in [0, 1], got {n}, {discount}")
        for part in self.partitions.values():
            part.n_step, part.discount = int(n), float(discount)
        self._out.clear()

    def __len__(self) -> int:
        return sum(p.num_transitions for p in self.partitions.values())

    def filled_bytes(self) -> int:
        """Bytes of the rows written so far (the arrays are preallocated: memory is touched as rows fill)."""
        return sum(int(p.size) * sum(a[0].nbytes for a in p.arrays.values()) for p in self.partitions.values())

    def sizes(self) -> dict[str, int]:
        return {name: p.num_transitions for name, p in self.partitions.items()}

    def valid_states(self, group: str | None = None) -> np.ndarray:
        """The state of every stored transition ``[N, D]`` (of one group's partitions when ``group`` is given),
        e.g. to fit a state normaliser."""
        names = GROUPS[group] if group is not None else PARTITIONS
        parts = [self.partitions[n] for n in names]
        states = [p.arrays["state"][: p.size][p.arrays["valid"][: p.size]] for p in parts]
        return np.concatenate([s for s in states if len(s)] or [np.zeros((0, self.spec.state_dim), np.float32)])

    def extend(self, block: Mapping[str, np.ndarray], stream_base: int = 0) -> int:
        """Adds every transition of ``block`` (rows of :mod:`robot_rl.replay.rows`: an actor's chunk, an episode)
        to the partitions its sources go to, one vectorised write per partition; returns how many transitions.
        ``stream_base`` keeps the envs of different actors apart in the frame sharing."""
        valid, source = block["valid"], block["source"]
        for name, codes in ROUTES.items():
            self.partitions[name].extend(block, valid & np.isin(source, codes), stream_base)
        return int(np.count_nonzero(valid))

    def add(self, obs: Mapping[str, Any], action: np.ndarray, reward: float, terminated: bool, truncated: bool,
            next_obs: Mapping[str, Any], *, stream: int = 0, **meta: Any) -> None:
        """Adds one transition of ``stream``; ``meta``: the fields of :data:`robot_rl.replay.rows.TRANSITION_DEFAULTS`
        (``source`` 'online' | 'demo' | 'intervention', the latter also going to online)."""
        if self._one is None:
            self._one = BlockBuilder(self.spec, self.action_dim, 1)
        self._one.add(0, obs, action, reward, terminated, truncated, next_obs, **meta)
        self.extend(self._one.take(), stream_base=stream)

    # ---------------------------------------------------------------- sampling
    def can_sample(self, mix: Mapping[str, float] | None = None) -> bool:
        """Whether some group of ``mix`` (default: the configured one) with a share > 0 holds data."""
        sizes = self.sizes()
        mix = mix if mix is not None else self.cfg.mix
        return any(w > 0 and sum(sizes[p] for p in GROUPS[g]) > 0 for g, w in mix.items())

    def _counts(self, batch_size: int, mix: Mapping[str, float]) -> dict[str, int]:
        """Per-partition sample counts for one minibatch (largest remainder; empty groups re-distributed)."""
        sizes = self.sizes()
        groups = {g: w for g, w in mix.items() if w > 0 and sum(sizes[p] for p in GROUPS[g]) > 0}
        if not groups:
            raise ValueError(f"cannot sample: every partition in mix {dict(mix)} is empty (sizes {sizes})")
        total = sum(groups.values())
        exact = {g: batch_size * w / total for g, w in groups.items()}
        counts = {g: int(np.floor(x)) for g, x in exact.items()}
        for g in sorted(exact, key=lambda g: counts[g] - exact[g])[: batch_size - sum(counts.values())]:
            counts[g] += 1
        per_partition = dict.fromkeys(PARTITIONS, 0)
        for g, n in counts.items():
            members = [p for p in GROUPS[g] if sizes[p] > 0]
            weights = np.array([sizes[p] for p in members], float)
            split = self.rng.multinomial(n, weights / weights.sum()) if len(members) > 1 else [n]
            for p, k in zip(members, split):
                per_partition[p] += int(k)
        return per_partition

    def sample(self, batch_size: int, mix: Mapping[str, float] | None = None, utd: int | None = None,
               reuse_output: bool = False, pixels: bool | None = None) -> dict[str, Any]:
        """A batch ``[B, ...]`` (or ``[utd, B, ...]``) of transitions, every minibatch holding the mix.

        Returns nested numpy arrays: ``obs``/``next_obs`` (``state``, ``pixels/<cam>`` uint8, ``instruction``),
        ``action``, ``reward``, ``terminated``, ``truncated``, ``intervened``, ``source``, ``policy_version``,
        ``episode_id``, ``step`` (and with :attr:`with_base` ``base_action``, ``next_base_action``,
        ``chunk_index``, ``next_chunk_index``; with :meth:`set_n_step` n-step ``reward`` and ``discount``).
        With ``reuse_output`` the arrays live in buffers reused by the next call of the same shape (no page faults
        on large pixel batches; copy them if you keep them). ``pixels``: include the camera frames (default
        :attr:`with_pixels`).
        """
        mix = mix if mix is not None else self.cfg.mix
        px = self.with_pixels if pixels is None else bool(pixels)
        u = utd or 1
        counts = self._counts(batch_size, mix)
        # Rows laid out partition-major inside each minibatch: [u, B] with partition p in columns [a_p, b_p).
        rows_by_partition = {p: self.partitions[p].sample_rows(u * n, self.rng).reshape(u, n)
                             for p, n in counts.items() if n > 0}
        out = self._output_buffers(u, batch_size, px) if reuse_output else None
        if out is None:
            parts = [self.partitions[p].gather(r.reshape(-1), pixels=px) for p, r in rows_by_partition.items()]
            flat = {k: np.concatenate([x[k].reshape(u, -1, *x[k].shape[1:]) for x in parts], axis=1)
                    for k in parts[0]}
        else:
            # Each partition's samples go straight into their columns of the output when those are contiguous
            # (utd 1, or a single partition); otherwise through one small block copy.
            col = 0
            for p, r in rows_by_partition.items():
                n = r.shape[1]
                if u == 1:
                    self.partitions[p].gather(r.reshape(-1), {k: v[0] for k, v in out.items()}, offset=col,
                                              pixels=px)
                elif len(rows_by_partition) == 1:
                    self.partitions[p].gather(r.reshape(-1), {k: v.reshape(u * n, *v.shape[2:])
                                                              for k, v in out.items()}, pixels=px)
                else:
                    block = self.partitions[p].gather(r.reshape(-1), pixels=px)
                    for k, v in block.items():
                        out[k][:, col:col + n] = v.reshape(u, n, *v.shape[1:])
                col += n
            flat = out
        if utd is None:
            flat = {k: v[0] for k, v in flat.items()}
        return nest(flat)

    def _output_buffers(self, u: int, batch_size: int, pixels: bool) -> dict[str, np.ndarray]:
        key = (u, batch_size, pixels)
        if key not in self._out:
            probe = self.partitions["online"].gather(np.zeros(1, np.int64), pixels=pixels)
            self._out[key] = {k: np.empty((u, batch_size, *v.shape[1:]), v.dtype) for k, v in probe.items()}
        return self._out[key]

    def state(self) -> dict[str, Any]:
        """Sampler RNG state (for exact resume)."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
