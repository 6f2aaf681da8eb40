"""Future-state prediction for delta end-effector actions (future-state-aware chunk execution, VLASH): the
controller target rolled forward through the actions still to run, and the EE following it."""

from __future__ import annotations

import numpy as np

TRACKING = 0.4
"""Share of the distance to its target the EE covers per control step: the arm's impedance controller at 20 Hz
(fitted on scripted PickCube motions: 6 mm mean error 6 steps ahead, against 30 mm for the target alone;
tests/policies/test_future.py)."""


def roll_ee_target(state: np.ndarray, actions: np.ndarray, target: np.ndarray, max_step: float,
                   low: np.ndarray, high: np.ndarray, max_lead: float = 0.05, period: float = 0.05,
                   tracking: float = TRACKING) -> np.ndarray:
    """``state`` (EE position ``[:3]``, orientation ``[3:7]``, EE velocity ``[7:10]``, ...) after ``actions [k, A]``
    (``[dx, dy, dz, ...]`` in [-1, 1]): the controller ``target`` moves by ``action * max_step`` per step, clipped
    to the workspace box ``low``/``high`` and to ``max_lead`` of the EE (as the arm env does), and the EE covers
    ``tracking`` of its distance to the target per step. The EE velocity becomes the last step's motion / ``period``;
    the rest of the state is kept."""
    out = np.array(state, np.float32, copy=True)
    ee = np.asarray(state[:3], np.float64).copy()
    prev = ee.copy()
    rolled = np.asarray(target, np.float64).copy()
    for action in np.asarray(actions, np.float64):
        rolled = np.clip(np.clip(rolled + action[:3] * max_step, low, high), ee - max_lead, ee + max_lead)
        prev, ee = ee, ee + tracking * (rolled - ee)
    if len(actions):
        out[:3] = ee
        if len(out) >= 10:
            out[7:10] = (ee - prev) / period
    return out
