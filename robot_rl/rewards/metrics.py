"""Splits, metrics and threshold calibration for the binary success classifier (numpy only)."""

from __future__ import annotations

import numpy as np

THRESHOLD_METRICS = ("accuracy", "f1", "balanced_accuracy")


def binary_metrics(pred: np.ndarray, label: np.ndarray) -> dict[str, float]:
    """Accuracy, precision, recall, F1 and the confusion counts of bool predictions against bool labels.

    Precision is 1.0 when nothing is predicted positive (no false success was raised), recall is 1.0 when there
    are no positives (none was missed): the conventions that keep an empty split from reading as a failure.
    """
    pred, label = np.asarray(pred, bool), np.asarray(label, bool)
    if pred.shape != label.shape:
        raise ValueError(f"predictions {pred.shape} and labels {label.shape} differ in shape")
    tp = int(np.sum(pred & label))
    fp = int(np.sum(pred & ~label))
    fn = int(np.sum(~pred & label))
    tn = int(np.sum(~pred & ~label))
    n = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    specificity = tn / (tn + fp) if tn + fp else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": (tp + tn) / n if n else float("nan"), "precision": precision, "recall": recall, "f1": f1,
            "balanced_accuracy": (recall + specificity) / 2, "tp": tp, "fp": fp, "tn": tn, "fn": fn,
            "frames": n, "positives": tp + fn}


def calibrate_threshold(proba: np.ndarray, label: np.ndarray, metric: str = "accuracy",
                        min_precision: float = 0.0) -> float:
    """The probability threshold (predict success when ``p >= threshold``) that maximises ``metric``.

    Candidates are the midpoints between consecutive distinct probabilities (plus the ends), so the choice sits
    in the gap between the classes rather than on a training example. Thresholds whose precision is below
    ``min_precision`` are skipped. Among equally good thresholds the middle one is taken (widest margin).
    """
    if metric not in THRESHOLD_METRICS:
        raise ValueError(f"threshold metric must be one of {', '.join(THRESHOLD_METRICS)}, got {metric!r}")
    p, y = np.asarray(proba, np.float64), np.asarray(label, bool)
    if p.shape != y.shape or p.ndim != 1:
        raise ValueError(f"calibrate_threshold needs 1-D probabilities and labels of one shape, got {p.shape}, "
                         f"{y.shape}")
    if len(p) == 0:
        raise ValueError("calibrate_threshold: the calibration split is empty (record more episodes)")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError("calibrate_threshold: probabilities must be finite and in [0, 1]")
    values = np.unique(p)
    candidates = np.concatenate([[values[0] / 2], (values[:-1] + values[1:]) / 2, [(values[-1] + 1) / 2]])
    # Vectorised confusion counts for every candidate: sort once, count positives at or above each threshold.
    order = np.argsort(p)
    ps, ys = p[order], y[order]
    above = len(p) - np.searchsorted(ps, candidates, side="left")
    pos_cum = np.concatenate([[0], np.cumsum(ys[::-1])])  # positives among the k largest probabilities
    tp = pos_cum[above].astype(np.float64)
    fp = above - tp
    pos, neg = float(y.sum()), float((~y).sum())
    tn = neg - fp
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), 1.0)
        recall = np.where(pos > 0, tp / max(pos, 1.0), 1.0)
        specificity = np.where(neg > 0, tn / max(neg, 1.0), 1.0)
        score = {"accuracy": (tp + tn) / len(p),
                 "f1": np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0),
                 "balanced_accuracy": (recall + specificity) / 2}[metric]
    eligible = precision >= min_precision
    if not eligible.any():
        return float(candidates[-1])  # nothing reaches the precision: never fire rather than fire falsely
    score = np.where(eligible, score, -np.inf)
    best = np.flatnonzero(score >= score.max() - 1e-12)
    return float(candidates[best[len(best) // 2]])


def split_by_group(episodes: np.ndarray, val_fraction: float, test_fraction: float, block: int = 50,
                   seed: int = 0, min_groups: int = 10) -> dict[str, np.ndarray]:
    """Frame indices of the train / val / test splits, whole episodes to one split.

    With fewer than ``min_groups`` episodes (a long human session), consecutive blocks of ``block`` frames of an
    episode are the units instead. Val and test get at least one unit each.
    """
    episodes = np.asarray(episodes)
    n = len(episodes)
    if n == 0:
        raise ValueError("no frames to split")
    units = episodes.astype(np.int64)
    if len(np.unique(units)) < min_groups:
        # Block index within each episode: position since the episode's first frame, integer-divided by block.
        first = {e: i for i, e in reversed(list(enumerate(episodes.tolist())))}
        pos = np.arange(n) - np.array([first[e] for e in episodes.tolist()])
        units = units * (n // max(block, 1) + 2) + pos // max(block, 1)
    groups = np.unique(units)
    if len(groups) < 3:
        raise ValueError(f"{n} frames form only {len(groups)} split unit(s); need >= 3 (episodes, or blocks of "
                         f"{block} frames) for train, validation and test")
    rng = np.random.default_rng(seed)
    groups = rng.permutation(groups)
    n_test = max(1, int(round(test_fraction * len(groups))))
    n_val = max(1, int(round(val_fraction * len(groups))))
    n_test = min(n_test, len(groups) - 2)
    n_val = min(n_val, len(groups) - n_test - 1)
    test, val = set(groups[:n_test].tolist()), set(groups[n_test:n_test + n_val].tolist())
    in_test = np.isin(units, list(test))
    in_val = np.isin(units, list(val))
    return {"train": np.flatnonzero(~in_test & ~in_val), "val": np.flatnonzero(in_val),
            "test": np.flatnonzero(in_test)}


def near_transition(labels: np.ndarray, episodes: np.ndarray, radius: int = 3) -> np.ndarray:
    """bool mask of frames within ``radius`` frames of a label change in the same episode (frames in recorded
    order): the hard cases (cube just below / above the lift height), reported apart from the easy bulk."""
    labels, episodes = np.asarray(labels, bool), np.asarray(episodes)
    change = np.flatnonzero((labels[1:] != labels[:-1]) & (episodes[1:] == episodes[:-1]))  # between i and i+1
    mask = np.zeros(len(labels), bool)
    for offset in range(-radius + 1, radius + 1):
        idx = change + offset
        inside = (idx >= 0) & (idx < len(labels))
        idx, src = idx[inside], change[inside]
        mask[idx[episodes[idx] == episodes[src]]] = True
    return mask
