"""Evaluation statistics in numpy: percentile-bootstrap confidence intervals and the interquartile mean (IQM)
with a stratified bootstrap across runs (the rliable method, without its heavy dependencies)."""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values: np.ndarray, stat=np.mean, reps: int = 2000, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float, float]:
    """(statistic, low, high) of a 1-D sample with a percentile bootstrap (1 - alpha) interval."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    resampled = values[rng.integers(0, values.size, (reps, values.size))]
    stats = np.apply_along_axis(stat, 1, resampled) if stat is not np.mean else resampled.mean(axis=1)
    low, high = np.percentile(stats, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(stat(values)), float(low), float(high)


def iqm(scores: np.ndarray) -> float:
    """Mean of the middle 50 % of all scores (flattened), as in Agarwal et al. 2021."""
    flat = np.sort(np.asarray(scores, dtype=float).ravel())
    n = flat.size
    lo, hi = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    return float(flat[lo:hi].mean()) if hi > lo else float(flat.mean())


def iqm_ci(scores: np.ndarray, reps: int = 2000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float, float]:
    """IQM over ``scores [runs, episodes]`` with a stratified bootstrap CI: runs are resampled, and episodes
    within each resampled run."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim == 1:
        scores = scores[:, None]
    rng = np.random.default_rng(seed)
    runs, eps = scores.shape
    stats = np.empty(reps)
    for i in range(reps):
        picked = scores[rng.integers(0, runs, runs)]
        picked = np.take_along_axis(picked, rng.integers(0, eps, (runs, eps)), axis=1)
        stats[i] = iqm(picked)
    low, high = np.percentile(stats, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return iqm(scores), float(low), float(high)
