"""The figures of ``benchmarks/finetune.py``: each method's summary over seeds (IQM with its CI, env steps to 90 %,
worst evaluation against the base) and the tables its docs page shows."""

from __future__ import annotations

import numpy as np
from common import Table


def human_share(windows: list[tuple[int, float]]) -> float:
    """The share of all env steps the scripted human steered, from ``(step at the window's end, its rate)`` rows
    (each rate weighted by its window's length: the last window may be short)."""
    ends = np.array([s for s, _ in windows], float)
    lengths = np.diff(ends, prepend=0.0)
    return float(np.dot(lengths, [v for _, v in windows]) / ends[-1])


def nominal_mark(step: int, every: int) -> int:
    """The evaluation mark an evaluation logged at ``step`` stands for: the asynchronous learner evaluates when its
    env-step count crosses a multiple of ``every``, a few steps after it (2000 may be logged as 2001)."""
    return round(step / every) * every


def summarise(method: str, runs: list[dict], seeds: list[int], every: int) -> dict:
    """One method's figures over its ``runs`` (one per seed); ``every``: the env steps between evaluations."""
    from robot_rl.training.stats import iqm_ci

    finals = np.array([r["final"] for r in runs])
    bases = np.array([r["base"] for r in runs])
    mid, lo, hi = iqm_ci(finals)
    to90 = [next((s for s, v in r["curve"] if v >= 0.9), None) for r in runs]
    drops = [min([v for s, v in r["curve"] if nominal_mark(s, every) > 2000] or [r["base"]]) - r["base"] for r in runs]
    return {"method": method, "seeds": seeds, "base_mean": float(bases.mean()), "final_iqm": mid, "final_ci": [lo, hi],
            "finals": finals.tolist(), "bases": bases.tolist(), "steps_to_90": to90, "worst_drop": drops,
            "wall_min": [round(r["wall_s"] / 60, 1) for r in runs], "curves": [r["curve"] for r in runs],
            "actor": [r.get("actor", {}) for r in runs],
            # the scripted human's share of all env steps and of the last logged window, per run
            **({"human_share": [human_share(r["interventions"]) for r in runs],
                "human_last": [r["interventions"][-1][1] for r in runs]} if all("interventions" in r for r in runs)
               else {})}


def _figure(value: float, form: str) -> str:
    """``value`` in ``form``; '-' where there is none (no base: RLPD from scratch)."""
    return "-" if np.isnan(value) else form.format(value)


def tables(figures: dict) -> list[Table]:
    """The result's tables: per method the summary over seeds, then every run's evaluation curve."""
    methods = figures["methods"]
    summary = Table(f"{figures['task']}, {figures['env_steps']} env steps",
                    ["method", "seeds", "base", "final success (IQM)", "95 % CI", "per seed", "env steps to 90 %",
                     "worst evaluation after 2k steps vs base", "minutes per run"], echo=False)
    curves = Table(f"{figures['task']}: success at each evaluation (env steps: success)",
                   ["method", "seed", "base", "evaluations"], echo=False)
    for m in methods:
        to90 = ", ".join("not reached" if s is None else str(s) for s in m["steps_to_90"])
        summary.add(m["method"], len(m["seeds"]), _figure(m["base_mean"], "{:.2f}"),
                    f"{m['final_iqm']:.2f}",
                    f"{m['final_ci'][0]:.2f}-{m['final_ci'][1]:.2f}", " / ".join(f"{v:.2f}" for v in m["finals"]),
                    to90, _figure(min(m["worst_drop"]), "{:+.2f}"), " / ".join(f"{v:.1f}" for v in m["wall_min"]))
        for seed, base, curve in zip(m["seeds"], m["bases"], m["curves"]):
            curves.add(m["method"], seed, _figure(base, "{:.2f}"), ", ".join(f"{s}: {v:.2f}" for s, v in curve))
    timing = Table("The actor's base-policy timing at the end of each run (actor and learner as processes)",
                   ["method", "seed", "base inference (ms, median)", "steps held for a late chunk",
                    "late chunks", "control jitter p99 (ms)"], echo=False)
    for m in methods:
        for seed, actor in zip(m["seeds"], m.get("actor", [])):
            if actor.get("jitter_p99_ms", 0) > 0:  # a paced actor process (lock-step runs have no control period)
                timing.add(m["method"], seed, f"{actor.get('base_inference_ms', 0):.0f}",
                           int(actor.get("base_missed_steps", 0)), int(actor.get("base_late_chunks", 0)),
                           f"{actor.get('jitter_p99_ms', 0):.1f}")
    human = Table("Env steps the scripted human steered (--interventions)",
                  ["method", "seed", "share of all env steps", "share in the last 500 env steps"], echo=False)
    for m in methods:
        for seed, share, last in zip(m["seeds"], m.get("human_share", []), m.get("human_last", [])):
            human.add(m["method"], seed, f"{share:.3f}", f"{last:.3f}")
    return [summary, curves] + ([timing] if timing.rows else []) + ([human] if human.rows else [])
