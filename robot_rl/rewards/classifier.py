"""The reward classifier: P(success | camera frames), trained on labelled frames, with a calibrated threshold.

Model: one conv tower per camera (the agent's :class:`~robot_rl.agents.encoders.ConvEncoder`, optionally the frozen
pretrained encoder of a learner via ``encoder.pretrained_path``), concatenated, then a small MLP to one logit.
Training augments with the agent's random shift plus brightness/colour jitter, weights the classes to balance
them, and keeps the epoch with the best validation loss. Frames are split **by episode** into train / validation
/ test, so near-identical neighbouring frames never sit on both sides of a split. The decision threshold is
calibrated on the validation split; the test split, touched by neither training nor calibration, gives the
reported accuracy / precision / recall.

Saved as ``<dir>/model.safetensors`` (weights) + ``<dir>/classifier.json`` (config, cameras, threshold, metrics,
the weights' sha256); nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from robot_rl.agents.config import EncoderConfig
from robot_rl.agents.encoders import ObservationEncoder, frames_to_input
from robot_rl.config import ConfigError, from_dict, to_dict
from robot_rl.rewards.frames import FrameSet, load_frames
from robot_rl.rewards.metrics import binary_metrics, calibrate_threshold, near_transition, split_by_group
from robot_rl.spaces import ObsSpec
from robot_rl.utils.progress import progress_bar
from robot_rl.utils.state_io import atomic_write

FORMAT, VERSION = "robot_rl.reward_classifier", 1
WEIGHTS, META = "model.safetensors", "classifier.json"


def _default_encoder() -> EncoderConfig:
    # Narrower than the agent's default: 4x cheaper per frame on a CPU, and success is a coarse visual cue.
    return EncoderConfig(conv_channels=(16, 32, 32), conv_strides=(2, 2, 2), latent_dim=64, augment_pad=4)


@dataclass
class RewardClassifierConfig:
    """How the success classifier is built, trained and calibrated."""

    cameras: tuple[str, ...] = ()
    """Cameras the classifier looks at (empty: every camera of the frames dataset)."""
    encoder: EncoderConfig = field(default_factory=_default_encoder)
    """Per-camera conv encoder (the agent's EncoderConfig: conv_channels, conv_strides, latent_dim, augment_pad
    for the random shift, pretrained_path + freeze_pretrained to use a learner's encoder; state fields unused)."""
    hidden_dim: int = 128
    """Hidden units of the MLP head on the concatenated camera latents."""
    dropout: float = 0.1
    """Dropout before the head's output layer (training only)."""
    epochs: int = 12
    """Passes over the training split."""
    batch_size: int = 64
    """Frames per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    color_jitter: float = 0.1
    """Brightness (per image) and colour gain (per channel) jitter: factors drawn in [1 - j, 1 + j]; 0 disables."""
    val_fraction: float = 0.2
    """Share of episodes held out to pick the best epoch and calibrate the threshold."""
    test_fraction: float = 0.2
    """Share of episodes held out for the reported metrics (used by nothing else)."""
    split_block: int = 50
    """With fewer than 10 episodes, frames are split in consecutive blocks of this many instead of by episode."""
    threshold_metric: str = "accuracy"
    """What the threshold maximises on the validation split: accuracy | f1 | balanced_accuracy."""
    min_precision: float = 0.0
    """Only thresholds whose validation precision reaches this are eligible (a false success ends an episode
    early with a reward, which hurts RL more than a missed one); the highest threshold wins if none does."""
    balance_classes: bool = True
    """Weight positives by negatives/positives in the loss (successes are usually the rarer class)."""
    seed: int = 0
    """Seed of the split, initialisation, batches and augmentation."""
    threads: int = 0
    """torch CPU threads during training (0: leave torch's setting)."""
    device: str = "cpu"
    """Torch device for training ('cpu', 'cuda', ...); a loaded classifier runs where load_classifier says."""

    def validate(self) -> None:
        checks = [
            (self.epochs >= 1, "epochs must be >= 1"), (self.batch_size >= 2, "batch_size must be >= 2"),
            (self.lr > 0, "lr must be > 0"), (self.hidden_dim >= 1, "hidden_dim must be >= 1"),
            (0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)"),
            (0.0 <= self.color_jitter < 1.0, "color_jitter must be in [0, 1)"),
            (0.0 < self.val_fraction < 1.0 and 0.0 < self.test_fraction < 1.0
             and self.val_fraction + self.test_fraction < 1.0,
             "val_fraction and test_fraction must be in (0, 1) with a sum below 1"),
            (self.split_block >= 1, "split_block must be >= 1"),
            (self.threshold_metric in ("accuracy", "f1", "balanced_accuracy"),
             "threshold_metric must be accuracy, f1 or balanced_accuracy"),
            (0.0 <= self.min_precision <= 1.0, "min_precision must be in [0, 1]"),
            (len(self.encoder.conv_channels) == len(self.encoder.conv_strides),
             "encoder.conv_channels and encoder.conv_strides must have the same length"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"reward classifier config: {message}")


class RewardClassifier(nn.Module):
    """Frames of every camera -> success logit. ``threshold`` (a buffer) turns probabilities into decisions."""

    def __init__(self, cameras: Mapping[str, Sequence[int]], cfg: RewardClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.camera_shapes = {cam: tuple(int(s) for s in cameras[cam]) for cam in sorted(cameras)}
        self.cameras = tuple(self.camera_shapes)
        enc_cfg = dataclasses.replace(cfg.encoder, state_hidden_dims=(), normalize_state=False)
        # The agent's encoder module (its conv towers, pretrained loading and safetensors format); state unused.
        self.encoder = ObservationEncoder(ObsSpec(state_dim=0, cameras=self.camera_shapes), enc_cfg)
        width = cfg.encoder.latent_dim * len(self.cameras)
        self.head = nn.Sequential(nn.Linear(width, cfg.hidden_dim), nn.ReLU(), nn.Dropout(cfg.dropout),
                                  nn.Linear(cfg.hidden_dim, 1))
        self.register_buffer("threshold", torch.full((1,), 0.5))

    def forward(self, pixels: Mapping[str, torch.Tensor], augment: bool = False,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """uint8 ``{cam: [B, H, W, 3]}`` -> logits ``[B]``."""
        parts = []
        for cam in self.cameras:
            x = frames_to_input(pixels[cam], self.cfg.encoder.augment_pad if augment else 0, generator)
            if augment:
                x = _color_jitter(x, self.cfg.color_jitter, generator)
            parts.append(self.encoder.convs[cam](x))
        return self.head(torch.cat(parts, dim=-1)).squeeze(-1)

    @torch.no_grad()
    def predict_proba(self, pixels: Mapping[str, Any], batch_size: int = 256) -> np.ndarray:
        """Success probabilities for ``{cam: uint8 [H, W, 3] or [B, H, W, 3]}`` (a single frame gives ``[1]``)."""
        arrays = {}
        for cam, shape in self.camera_shapes.items():
            if cam not in pixels:
                raise KeyError(f"reward classifier needs camera {cam!r}; the observation has {sorted(pixels)}")
            a = np.asarray(pixels[cam])
            a = a[None] if a.ndim == 3 else a
            if a.shape[1:] != shape or a.dtype != np.uint8:
                raise ValueError(f"camera {cam!r}: the classifier was trained on uint8 {shape} frames, got "
                                 f"{a.dtype} {a.shape[1:]}")
            arrays[cam] = a
        n = len(next(iter(arrays.values())))
        was_training = self.training
        self.eval()
        device = self.threshold.device
        out = []
        for i in range(0, n, batch_size):
            batch = {c: torch.from_numpy(np.ascontiguousarray(a[i:i + batch_size])).to(device)
                     for c, a in arrays.items()}
            out.append(torch.sigmoid(self(batch)).float().cpu().numpy())
        self.train(was_training)
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def predict(self, pixels: Mapping[str, Any]) -> np.ndarray:
        """bool success decisions (probability >= the calibrated threshold)."""
        return self.predict_proba(pixels) >= float(self.threshold)


def _color_jitter(x: torch.Tensor, amount: float, generator: torch.Generator | None) -> torch.Tensor:
    """Scales each image's brightness and each channel's gain by factors in [1 - amount, 1 + amount]."""
    if amount <= 0:
        return x
    b, c = x.shape[:2]
    bright = 1 + amount * (2 * torch.rand(b, 1, 1, 1, generator=generator, device=x.device) - 1)
    gain = 1 + amount * (2 * torch.rand(b, c, 1, 1, generator=generator, device=x.device) - 1)
    return ((x + 0.5) * bright * gain).clamp_(0.0, 1.0) - 0.5


@dataclass
class TrainResult:
    """What :func:`train_classifier` produced."""

    model: RewardClassifier
    threshold: float
    metrics: dict[str, dict[str, float]]
    """``{"train"|"val"|"test"|"test_near_transition": {accuracy, precision, recall, f1, tp, fp, tn, fn, frames,
    positives}}``; the last is the test frames within 3 steps of a label change (the hard cases)."""
    history: list[dict[str, float]]
    """Per epoch: train loss, val loss, val accuracy at 0.5."""
    seconds: float
    frames: dict[str, int]
    """Frames per split."""
    best_epoch: int

    def constant(self) -> str | None:
        """``"success"`` or ``"failure"`` when the classifier says that for every held-out frame (validation and
        test), whatever they show: as a reward it would end every episode at its first step, or never."""
        held = [self.metrics[s] for s in ("val", "test") if self.metrics[s]["frames"]]
        if held and all(m["tn"] + m["fn"] == 0 for m in held):
            return "success"
        if held and all(m["tp"] + m["fp"] == 0 for m in held):
            return "failure"
        return None


def train_classifier(data: FrameSet | Sequence[FrameSet], cfg: RewardClassifierConfig | None = None,
                     progress: bool = False) -> TrainResult:
    """Trains, selects the best epoch on validation, calibrates the threshold there and scores the test split."""
    cfg = cfg or RewardClassifierConfig()
    cfg.validate()
    start = time.perf_counter()
    frames = _merge([data] if isinstance(data, FrameSet) else list(data), cfg.cameras)
    splits = split_by_group(frames.episodes, cfg.val_fraction, cfg.test_fraction, cfg.split_block, cfg.seed)
    train_idx = splits["train"]
    if frames.labels[train_idx].all() or not frames.labels[train_idx].any():
        raise ValueError(f"the training split needs both success and failure frames (it has "
                         f"{int(frames.labels[train_idx].sum())} successes of {len(train_idx)}); record more "
                         "episodes or label both outcomes")
    threads = torch.get_num_threads()
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    try:
        return _fit(frames, splits, cfg, progress, start)
    finally:
        torch.set_num_threads(threads)  # the caller's setting: training is not allowed to change it for good


def _fit(frames: FrameSet, splits: dict[str, np.ndarray], cfg: RewardClassifierConfig, progress: bool,
         start: float) -> TrainResult:
    train_idx = splits["train"]
    torch.manual_seed(cfg.seed)
    device = torch.device(cfg.device)
    model = RewardClassifier({c: a.shape[1:] for c, a in frames.pixels.items()}, cfg).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    pos = float(frames.labels[train_idx].sum())
    pos_weight = torch.tensor((len(train_idx) - pos) / pos if cfg.balance_classes else 1.0, device=device)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    pixels_t = {c: torch.from_numpy(a) for c, a in frames.pixels.items()}  # uint8, shared with numpy (no copy)
    labels_t = torch.from_numpy(frames.labels.astype(np.float32))
    history: list[dict[str, float]] = []
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    with progress_bar(progress, info=True) as bar:
        task = bar.add_task("training reward classifier", total=cfg.epochs, info="")
        for epoch in range(cfg.epochs):
            model.train()
            order = rng.permutation(train_idx)
            losses = []
            for i in range(0, len(order) - 1, cfg.batch_size):
                idx = torch.from_numpy(order[i:i + cfg.batch_size])
                if len(idx) < 2:
                    continue
                batch = {c: p[idx].to(device) for c, p in pixels_t.items()}
                logits = model(batch, augment=True, generator=gen)
                loss = nn.functional.binary_cross_entropy_with_logits(logits, labels_t[idx].to(device),
                                                                      pos_weight=pos_weight)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
            val_p = _proba(model, frames, splits["val"])
            val_y = frames.labels[splits["val"]]
            val_loss = _bce(val_p, val_y)
            row = {"epoch": epoch + 1, "train_loss": float(np.mean(losses)), "val_loss": val_loss,
                   "val_accuracy": float(np.mean((val_p >= 0.5) == val_y))}
            history.append(row)
            if best is None or val_loss < best[0]:
                best = (val_loss, epoch + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
            bar.advance(task)
            bar.update(task, info=f"loss {row['train_loss']:.3f}  val loss {val_loss:.3f}  "
                                  f"val acc {row['val_accuracy']:.3f}")
    assert best is not None
    model.load_state_dict(best[2])
    val_p = _proba(model, frames, splits["val"])
    threshold = calibrate_threshold(val_p, frames.labels[splits["val"]], cfg.threshold_metric, cfg.min_precision)
    model.threshold.fill_(threshold)
    metrics = {name: binary_metrics(_proba(model, frames, idx) >= threshold, frames.labels[idx])
               for name, idx in splits.items()}
    hard = splits["test"][near_transition(frames.labels, frames.episodes)[splits["test"]]]
    metrics["test_near_transition"] = binary_metrics(_proba(model, frames, hard) >= threshold, frames.labels[hard])
    return TrainResult(model, threshold, metrics, history, time.perf_counter() - start,
                       {k: len(v) for k, v in splits.items()}, best[1])


def _proba(model: RewardClassifier, frames: FrameSet, idx: np.ndarray) -> np.ndarray:
    if len(idx) == 0:
        return np.zeros(0, np.float32)
    return model.predict_proba({c: a[idx] for c, a in frames.pixels.items()})


def _bce(p: np.ndarray, y: np.ndarray) -> float:
    if len(p) == 0:
        return float("nan")
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _merge(sets: list[FrameSet], cameras: tuple[str, ...]) -> FrameSet:
    """One FrameSet from several datasets (episode ids made distinct), restricted to ``cameras``."""
    if not sets:
        raise ValueError("no frames datasets given")
    wanted = tuple(cameras) or tuple(sorted(sets[0].pixels))
    for i, s in enumerate(sets):
        missing = [c for c in wanted if c not in s.pixels]
        if missing:
            raise ValueError(f"frames dataset {i} has no camera(s) {missing} (has {sorted(s.pixels)})")
        for c in wanted:
            if s.pixels[c].shape[1:] != sets[0].pixels[c].shape[1:]:
                raise ValueError(f"camera {c!r}: frames of different sizes across datasets "
                                 f"({sets[0].pixels[c].shape[1:]} vs {s.pixels[c].shape[1:]})")
    if len(sets) == 1:
        s = sets[0]
        return FrameSet({c: s.pixels[c] for c in wanted}, s.labels, s.episodes, s.env_success, s.meta)
    offsets = np.cumsum([0] + [int(s.episodes.max()) + 1 if len(s) else 0 for s in sets[:-1]])
    return FrameSet({c: np.concatenate([s.pixels[c] for s in sets]) for c in wanted},
                    np.concatenate([s.labels for s in sets]),
                    np.concatenate([s.episodes + o for s, o in zip(sets, offsets)]).astype(np.int32),
                    np.concatenate([s.env_success for s in sets]), {"merged": [s.meta for s in sets]})


def save_classifier(model: RewardClassifier, path: str | Path, extra: Mapping[str, Any] | None = None) -> Path:
    """Writes ``<path>/model.safetensors`` and ``<path>/classifier.json`` (each atomically, weights first)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if v.numel() > 0}
    atomic_write(path / WEIGHTS, lambda f: save_file(tensors, str(f)))
    meta = {"format": FORMAT, "version": VERSION, "config": to_dict(model.cfg),
            "cameras": {c: list(s) for c, s in model.camera_shapes.items()}, "threshold": float(model.threshold),
            "weights_sha256": hashlib.sha256((path / WEIGHTS).read_bytes()).hexdigest(), **dict(extra or {})}
    atomic_write(path / META, lambda f: f.write_text(json.dumps(meta, indent=1)))
    return path


def check_saved(path: str | Path) -> Path:
    """``path`` as a Path if it holds a saved classifier's two files, else FileNotFoundError saying what is missing."""
    path = Path(path)
    if not (path / META).is_file() or not (path / WEIGHTS).is_file():
        raise FileNotFoundError(f"{path}: not a saved reward classifier (needs {META} and {WEIGHTS}; "
                                "train one with `robot-rl train-reward`)")
    return path


def load_classifier(path: str | Path, device: str = "cpu") -> RewardClassifier:
    """A classifier saved by :func:`save_classifier` (in eval mode on ``device``), its threshold included."""
    path = check_saved(path)
    meta = json.loads((path / META).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path / META}: not a reward classifier (format {meta.get('format')!r})")
    if meta.get("weights_sha256") != hashlib.sha256((path / WEIGHTS).read_bytes()).hexdigest():
        raise ValueError(f"{path}: {WEIGHTS} does not match {META} (sha256 differs): the folder mixes two saves")
    try:
        cfg = from_dict(RewardClassifierConfig, meta["config"])
    except ConfigError as exc:
        raise ValueError(f"{path / META}: bad config: {exc}") from None
    # Its weights are in model.safetensors; the pretrained file need not exist here.
    cfg = dataclasses.replace(cfg, encoder=dataclasses.replace(cfg.encoder, pretrained_path=None))
    model = RewardClassifier(meta["cameras"], cfg)
    state = load_file(str(path / WEIGHTS))
    own = model.state_dict()
    state.update({k: v for k, v in own.items() if v.numel() == 0})  # empty buffers are not stored
    model.load_state_dict(state)
    model.meta = meta
    return model.to(device).eval()


def train_from_paths(paths: Sequence[str | Path], cfg: RewardClassifierConfig,
                     progress: bool = False) -> TrainResult:
    """Loads frames datasets (only the configured cameras) and trains on them."""
    return train_classifier([load_frames(p, tuple(cfg.cameras)) for p in paths], cfg, progress)
