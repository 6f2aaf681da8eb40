"""The progress line's figures, from the learner's ``status.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path


def status_line(run_dir: Path) -> str:
    """Updates, the update-to-data ratio (window and run), the policy lag and the last evaluation; empty before
    the learner wrote any."""
    try:
        s = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return ""
    def ratio(key: str) -> str:  # none yet (before learning starts, or no env step in the window): "-"
        value = s.get(key)
        return "-" if value is None or math.isnan(value) else f"{value:.2f}"

    line = f"updates {s.get('updates', 0)} | utd {ratio('utd_window')} (run {ratio('utd_actual')})"
    if "policy_lag_steps" in s:
        line += f" | lag {s['policy_lag_steps']:.0f} steps"
    if "eval_return" in s:
        line += f" | eval return {s['eval_return']:.1f}"
    if s.get("eval_success") is not None:
        line += f" success {s['eval_success']:.0%}"
    return line
