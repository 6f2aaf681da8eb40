import numpy as np
import pytest
import torch

from robot_rl.utils.state_io import load_state, save_state


def test_nested_state_round_trip(tmp_path):
    state = {"a": torch.arange(6.0).reshape(2, 3), "opt": {"state": {0: {"step": torch.tensor(3.0)}},
             "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "name": "critic"}]},
             "rng": np.random.default_rng(1).bit_generator.state, "n": 7, "none": None, "arr": np.ones(3, np.int64)}
    save_state(tmp_path / "s.safetensors", state)
    out = load_state(tmp_path / "s.safetensors")
    assert torch.equal(out["a"], state["a"])
    assert out["opt"]["state"][0]["step"].item() == 3.0
    assert out["opt"]["param_groups"][0]["betas"] == [0.9, 0.999]
    assert out["rng"] == state["rng"] and out["n"] == 7 and out["none"] is None
    np.testing.assert_array_equal(out["arr"], state["arr"])


def test_rejects_unstorable_values_and_foreign_files(tmp_path):
    with pytest.raises(TypeError):
        save_state(tmp_path / "x.safetensors", {"f": object()})
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="metadata"):
        load_state(tmp_path / "plain.safetensors")
