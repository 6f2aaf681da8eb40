"""Threshold calibration, metrics and the by-episode split."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.rewards.metrics import binary_metrics, calibrate_threshold, near_transition, split_by_group

pytestmark = pytest.mark.timeout(30)


def brute_force_best(p: np.ndarray, y: np.ndarray) -> float:
    """Best accuracy over every threshold that changes a decision."""
    return max(np.mean((p >= t) == y) for t in np.concatenate([p, [1.1]]))


def test_separable_classes_threshold_sits_in_the_gap() -> None:
    p = np.array([0.05, 0.1, 0.3, 0.35, 0.8, 0.9, 0.95])
    y = np.array([0, 0, 0, 0, 1, 1, 1], bool)
    t = calibrate_threshold(p, y)
    assert 0.35 < t < 0.8
    assert binary_metrics(p >= t, y)["accuracy"] == 1.0


def test_shifted_probabilities_are_calibrated() -> None:
    """A classifier whose probabilities are all too high (positives ~0.9, negatives ~0.7) is still perfect once
    the threshold moves above the negatives: the default 0.5 would call every frame a success."""
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.3
    p = np.where(y, rng.uniform(0.85, 0.99, 400), rng.uniform(0.6, 0.8, 400))
    assert binary_metrics(p >= 0.5, y)["accuracy"] < 0.4
    t = calibrate_threshold(p, y)
    assert 0.8 <= t <= 0.85 and binary_metrics(p >= t, y)["accuracy"] == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_calibration_maximises_accuracy_on_overlapping_classes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.random(300) < 0.4
    p = np.clip(np.where(y, rng.normal(0.65, 0.15, 300), rng.normal(0.4, 0.15, 300)), 0, 1)
    t = calibrate_threshold(p, y)
    assert np.mean((p >= t) == y) == pytest.approx(brute_force_best(p, y))


def test_min_precision_trades_recall_for_fewer_false_successes() -> None:
    rng = np.random.default_rng(1)
    y = rng.random(500) < 0.5
    p = np.clip(np.where(y, rng.normal(0.7, 0.15, 500), rng.normal(0.35, 0.15, 500)), 0, 1)
    plain = binary_metrics(p >= calibrate_threshold(p, y), y)
    strict_t = calibrate_threshold(p, y, min_precision=0.99)
    strict = binary_metrics(p >= strict_t, y)
    assert strict["precision"] >= 0.99 > plain["precision"]
    assert strict["recall"] < plain["recall"]
    # Unreachable precision: the threshold is above every probability (never fire rather than fire falsely).
    impossible = calibrate_threshold(np.array([0.9, 0.9]), np.array([True, False]), min_precision=1.0)
    assert impossible > 0.9


def test_f1_and_balanced_accuracy_metrics() -> None:
    p = np.array([0.1, 0.2, 0.6, 0.7, 0.9])
    y = np.array([0, 0, 1, 0, 1], bool)
    for metric in ("f1", "balanced_accuracy"):
        t = calibrate_threshold(p, y, metric)
        assert 0.0 < t < 1.0


def test_binary_metrics_counts() -> None:
    m = binary_metrics(np.array([1, 1, 0, 0, 1], bool), np.array([1, 0, 0, 1, 1], bool))
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (2, 1, 1, 1)
    assert m["accuracy"] == pytest.approx(0.6) and m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3) and m["frames"] == 5 and m["positives"] == 3
    empty_pos = binary_metrics(np.zeros(3, bool), np.zeros(3, bool))
    assert empty_pos["precision"] == 1.0 and empty_pos["recall"] == 1.0 and empty_pos["accuracy"] == 1.0


@pytest.mark.parametrize("p, y, match", [
    (np.array([]), np.array([], bool), "empty"),
    (np.array([0.2, np.nan]), np.array([0, 1], bool), "finite"),
    (np.array([0.2, 1.5]), np.array([0, 1], bool), r"\[0, 1\]"),
    (np.array([0.2, 0.4]), np.array([0, 1, 1], bool), "shape"),
])
def test_calibration_rejects_bad_input(p: np.ndarray, y: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        calibrate_threshold(p, y)
    with pytest.raises(ValueError, match="metric"):
        calibrate_threshold(np.array([0.5]), np.array([True]), metric="auc")


def test_split_keeps_episodes_whole() -> None:
    episodes = np.repeat(np.arange(20), 15)
    splits = split_by_group(episodes, 0.2, 0.2, seed=3)
    sets = {k: set(episodes[v].tolist()) for k, v in splits.items()}
    assert not (sets["train"] & sets["val"]) and not (sets["train"] & sets["test"]) and not (sets["val"] & sets["test"])
    assert len(sets["val"]) == 4 and len(sets["test"]) == 4
    assert sorted(np.concatenate(list(splits.values())).tolist()) == list(range(len(episodes)))
    assert split_by_group(episodes, 0.2, 0.2, seed=3)["test"].tolist() == splits["test"].tolist()  # reproducible


def test_split_uses_blocks_for_few_long_episodes() -> None:
    episodes = np.repeat([0, 1], 500)  # e.g. two long human sessions
    splits = split_by_group(episodes, 0.2, 0.2, block=50)
    for name in ("val", "test"):
        idx = splits[name]
        assert len(idx) >= 50 and len(idx) % 50 == 0  # whole blocks
    with pytest.raises(ValueError, match="need >= 3"):
        split_by_group(np.zeros(60, int), 0.2, 0.2, block=50)
    with pytest.raises(ValueError, match="no frames"):
        split_by_group(np.zeros(0, int), 0.2, 0.2)


def test_near_transition_stays_inside_episodes() -> None:
    labels = np.array([0, 0, 0, 1, 1, 1, 0, 0, 0, 0], bool)
    episodes = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    mask = near_transition(labels, episodes, radius=1)
    assert np.flatnonzero(mask).tolist() == [2, 3]  # the 1 -> 0 at the episode boundary is no transition
