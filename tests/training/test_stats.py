import numpy as np

from robot_rl.training.stats import bootstrap_ci, iqm, iqm_ci


def test_bootstrap_ci_brackets_the_mean_and_shrinks_with_data():
    rng = np.random.default_rng(0)
    small = rng.normal(5, 1, 20)
    large = rng.normal(5, 1, 2000)
    m, lo, hi = bootstrap_ci(small)
    assert lo < m < hi and lo < 5 < hi
    _, lo2, hi2 = bootstrap_ci(large)
    assert (hi2 - lo2) < (hi - lo) / 5


def test_iqm_ignores_the_tails_and_ci_covers_it():
    scores = np.array([[0, 1, 1, 1], [1, 1, 1, 100.0]])
    assert iqm(scores) == 1.0
    value, lo, hi = iqm_ci(np.random.default_rng(1).normal(0, 1, (5, 20)))
    assert lo <= value <= hi
