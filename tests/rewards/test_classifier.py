"""The classifier on synthetic frames (fast): training and calibration, frozen pretrained encoder, save/load, and
the commands' errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.agents.config import EncoderConfig
from robot_rl.cli import main
from robot_rl.rewards.classifier import (
    RewardClassifier,
    RewardClassifierConfig,
    load_classifier,
    save_classifier,
    train_classifier,
)
from robot_rl.rewards.frames import FrameSet, FrameWriter

pytestmark = pytest.mark.timeout(60)

SIZE = 16


def small_cfg(**kw: object) -> RewardClassifierConfig:
    enc = EncoderConfig(conv_channels=(8, 8), conv_strides=(2, 2), latent_dim=16, augment_pad=1)
    fields = {"encoder": enc, "hidden_dim": 16, "epochs": 4, "batch_size": 32, "threads": 1, **kw}
    return RewardClassifierConfig(**fields)


def synthetic(n_episodes: int = 12, steps: int = 20, seed: int = 0) -> FrameSet:
    """Success frames carry a bright square in the lower half, failures in the upper half (plus noise)."""
    rng = np.random.default_rng(seed)
    n = n_episodes * steps
    labels = np.zeros(n, bool)
    for ep in range(n_episodes):  # each episode succeeds from a random step on
        labels[ep * steps + rng.integers(steps // 4, steps):(ep + 1) * steps] = True
    img = rng.integers(0, 60, (n, SIZE, SIZE, 3)).astype(np.uint8)
    for i, y in enumerate(labels):
        r = rng.integers(9, 13) if y else rng.integers(0, 4)
        c = rng.integers(0, SIZE - 4)
        img[i, r:r + 4, c:c + 4] = 250
    return FrameSet({"front": img}, labels, np.repeat(np.arange(n_episodes), steps).astype(np.int32),
                    labels.astype(np.int8))


def test_training_learns_and_calibrates() -> None:
    result = train_classifier(synthetic(), small_cfg(epochs=8, lr=3e-3))
    assert result.metrics["test"]["accuracy"] >= 0.9, result.metrics
    assert set(result.metrics) == {"train", "val", "test", "test_near_transition"}
    assert result.frames == {"train": 160, "val": 40, "test": 40}  # 12 episodes: 8 / 2 / 2
    assert 0.0 < result.threshold < 1.0 and float(result.model.threshold) == pytest.approx(result.threshold)
    assert len(result.history) == 8 and 1 <= result.best_epoch <= 8


def test_training_rejects_single_class_and_bad_config() -> None:
    data = synthetic()
    data.labels[:] = False
    with pytest.raises(ValueError, match="both success and failure"):
        train_classifier(data, small_cfg())
    with pytest.raises(ValueError, match="val_fraction"):
        train_classifier(synthetic(), small_cfg(val_fraction=0.6, test_fraction=0.5))
    with pytest.raises(ValueError, match="no camera"):
        train_classifier(synthetic(), small_cfg(cameras=("wrist",)))


def test_frozen_pretrained_encoder_is_not_trained(tmp_path: Path) -> None:
    cfg = small_cfg()
    donor = RewardClassifier({"front": (SIZE, SIZE, 3)}, cfg)
    donor.encoder.save_pretrained(tmp_path / "enc.safetensors")  # the learner's encoder file format
    cfg = small_cfg(epochs=2)
    cfg = dataclasses.replace(cfg, encoder=dataclasses.replace(cfg.encoder,
                                                               pretrained_path=str(tmp_path / "enc.safetensors")))
    result = train_classifier(synthetic(), cfg)
    for (name, a), b in zip(donor.encoder.convs.state_dict().items(), result.model.encoder.convs.state_dict().values()):
        assert torch.equal(a, b), f"{name} changed although frozen"
    head0 = RewardClassifier({"front": (SIZE, SIZE, 3)}, small_cfg()).head[0].weight
    assert not torch.equal(head0, result.model.head[0].weight)


def test_save_load_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = RewardClassifier({"front": (SIZE, SIZE, 3), "wrist": (SIZE, SIZE, 3)}, small_cfg())
    model.threshold.fill_(0.37)
    save_classifier(model, tmp_path / "clf", {"metrics": {"test": {"accuracy": 0.5}}})
    loaded = load_classifier(tmp_path / "clf")
    frames = {c: np.random.default_rng(1).integers(0, 255, (5, SIZE, SIZE, 3)).astype(np.uint8)
              for c in ("front", "wrist")}
    np.testing.assert_allclose(loaded.predict_proba(frames), model.predict_proba(frames), rtol=1e-6)
    assert float(loaded.threshold) == pytest.approx(0.37) and loaded.cameras == ("front", "wrist")
    assert loaded.meta["metrics"]["test"]["accuracy"] == 0.5 and not loaded.training
    single = loaded.predict_proba({c: f[0] for c, f in frames.items()})  # one frame [H, W, 3]
    assert single.shape == (1,)
    assert loaded.predict({c: f[:2] for c, f in frames.items()}).dtype == bool
    meta = json.loads((tmp_path / "clf" / "classifier.json").read_text())
    assert meta["config"]["encoder"]["conv_channels"] == [8, 8]
    assert not list((tmp_path / "clf").glob("*.pt")) and not list((tmp_path / "clf").glob("*.pkl"))


def test_load_and_predict_errors(tmp_path: Path) -> None:
    model = RewardClassifier({"front": (SIZE, SIZE, 3)}, small_cfg())
    save_classifier(model, tmp_path / "clf")
    with pytest.raises(FileNotFoundError, match="not a saved reward classifier"):
        load_classifier(tmp_path / "nothing")
    with pytest.raises(KeyError, match="camera 'front'"):
        model.predict_proba({"wrist": np.zeros((SIZE, SIZE, 3), np.uint8)})
    with pytest.raises(ValueError, match="trained on uint8"):
        model.predict_proba({"front": np.zeros((32, 32, 3), np.uint8)})
    other = RewardClassifier({"front": (SIZE, SIZE, 3)}, small_cfg())
    save_classifier(other, tmp_path / "other")
    (tmp_path / "clf" / "model.safetensors").write_bytes((tmp_path / "other" / "model.safetensors").read_bytes())
    with pytest.raises(ValueError, match="sha256"):
        load_classifier(tmp_path / "clf")


def write_frames(path: Path, data: FrameSet) -> None:
    w = FrameWriter(path, {c: a.shape[1:] for c, a in data.pixels.items()}, {"mode": "test"})
    for i in range(len(data)):
        w.add({c: a[i] for c, a in data.pixels.items()}, bool(data.labels[i]), int(data.episodes[i]), i, None)
    w.publish()


def test_train_reward_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_frames(tmp_path / "f.zarr", synthetic())
    cfg_file = tmp_path / "clf.yaml"
    cfg_file.write_text("encoder: {conv_channels: [8, 8], conv_strides: [2, 2], latent_dim: 16, augment_pad: 1}\n"
                        "hidden_dim: 16\n")
    rc = main(["train-reward", str(tmp_path / "f.zarr"), "--config", str(cfg_file), "--epochs", "2", "--threads",
               "1", "--out", str(tmp_path / "clf"), "--no-progress"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["classifier"] == str(tmp_path / "clf") and 0 <= report["test"]["accuracy"] <= 1
    meta = json.loads((tmp_path / "clf" / "classifier.json").read_text())
    assert meta["config"]["epochs"] == 2 and meta["config"]["hidden_dim"] == 16 and "test" in meta["metrics"]
    # The same --out again is refused rather than silently replaced.
    assert main(["train-reward", str(tmp_path / "f.zarr"), "--out", str(tmp_path / "clf"), "--no-progress"]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["train-reward", "/nonexistent/frames.zarr"], "no frames dataset"),
    (["train-reward", "{frames}", "--epochs", "0"], "epochs must be >= 1"),
    (["train-reward", "{frames}", "--cameras", "side"], "no camera(s) ['side']"),
    (["train-reward", "{frames}", "--config", "/nonexistent.yaml"], "config file not found"),
    (["record-frames", "NoSuchTask"], "unknown task"),
    (["record-frames", "PickCube", "--episodes", "0"], "episodes must be >= 1"),
    (["record-frames", "PickCube", "--mode", "keys", "--device", "scripted"], "needs a human device"),
])
def test_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    frames = tmp_path / "f.zarr"
    write_frames(frames, synthetic(n_episodes=4, steps=5))
    argv = [a.replace("{frames}", str(frames)) for a in argv]
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_classifier_that_says_one_thing_for_every_frame_is_flagged(tmp_path: Path, caplog) -> None:
    """Frames that show nothing of the outcome (all alike): the classifier can only say the same for every one, as
    a robot day's too few frames made it (every training episode then ended at its first step); train-reward says
    so. A classifier that learned is not flagged."""
    blank = synthetic()
    blank.pixels["front"][:] = 0
    assert train_classifier(blank, small_cfg()).constant() in ("success", "failure")
    assert train_classifier(synthetic(), small_cfg(epochs=8, lr=3e-3)).constant() is None
    write_frames(tmp_path / "blank.zarr", blank)
    with caplog.at_level("WARNING"):
        assert main(["train-reward", str(tmp_path / "blank.zarr"), "--epochs", "2", "--threads", "1", "--out",
                     str(tmp_path / "clf"), "--no-progress"]) == 0
    assert "for every held-out frame" in caplog.text, caplog.text
