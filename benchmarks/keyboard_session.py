"""A person's keyboard session, played into tmux: ``robot-rl record-demos pickcube --device keyboard -n 10`` runs in a
tmux pane and this script types into it as an operator would (``tmux send-keys``): it waits two seconds before each
attempt, presses the ready key, steers (``d`` repeated as a terminal's autorepeat sends it), then labels the
attempt with Enter (success) or ``x`` (failure), or presses Backspace to record it again. Twelve attempts, two of
them re-recorded, one steered for 12 s (past the task's 100-step limit, which does not apply to a person).

Checks what the operator's seat promises: no attempt starts before the ready key (each kept episode's length is its
steering time at 20 Hz, not the wait), no time-out the operator did not choose, labels equal the keys pressed,
re-recorded attempts leave no trace (10 episodes, ids 0-9).

    python benchmarks/keyboard_session.py [--out /tmp/keyboard_session.zarr]

Needs tmux. Runs about 80 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import Table, write_result

ROOT = Path(__file__).resolve().parents[1]

SESSION = "robot_rl_keyboard_session"
RATE_HZ = 20
# (key that ends the attempt, seconds of steering before it)
PLAN = [("Enter", 3.0), ("x", 2.0), ("BSpace", 1.5), ("Enter", 2.0), ("Enter", 12.0), ("x", 1.0), ("Enter", 2.0),
        ("BSpace", 1.0), ("x", 2.0), ("Enter", 2.5), ("Enter", 2.0), ("x", 6.0)]


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def play(out: Path) -> None:
    tmux("kill-session", "-t", SESSION)
    command = (f"cd {ROOT} && MUJOCO_GL=egl {sys.executable} -m robot_rl.cli record-demos pickcube "
               f"--device keyboard -n 10 --keep-failures --rate {RATE_HZ} --out {out} --overwrite; sleep 600")
    tmux("new-session", "-d", "-s", SESSION, "-x", "150", "-y", "40", command)
    deadline = time.monotonic() + 120
    while "ready?" not in tmux("capture-pane", "-p", "-t", SESSION):
        if time.monotonic() > deadline:
            raise TimeoutError("record-demos never asked for the ready key:\n" +
                               tmux("capture-pane", "-p", "-t", SESSION))
        time.sleep(0.5)
    for key, seconds in PLAN:
        time.sleep(2.0)  # the operator takes their time: nothing may be recorded meanwhile
        tmux("send-keys", "-t", SESSION, "g")
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            tmux("send-keys", "-t", SESSION, "d")
            time.sleep(0.05)
        tmux("send-keys", "-t", SESSION, key)
        time.sleep(1.0)
    deadline = time.monotonic() + 60
    while not (out / "dataset.json").exists() or not json.loads((out / "dataset.json").read_text()).get("complete"):
        if time.monotonic() > deadline:
            raise TimeoutError("the session did not complete:\n" + tmux("capture-pane", "-p", "-t", SESSION))
        time.sleep(0.5)
    tmux("kill-session", "-t", SESSION)


def check(out: Path) -> dict:
    meta = json.loads((out / "dataset.json").read_text())
    kept = [(key, seconds) for key, seconds in PLAN if key != "BSpace"]
    episodes = meta["episodes"]
    rows = []
    for ep, (key, seconds) in zip(episodes, kept, strict=True):
        expected = round(seconds * RATE_HZ)
        rows.append({"episode": ep["episode_id"], "key": key, "label": "success" if ep["success"] else "failure",
                     "by": ep["label"], "steps": ep["length"], "steered_steps": expected})
    problems = []
    if [ep["episode_id"] for ep in episodes] != list(range(len(kept))):
        problems.append(f"episode ids {[ep['episode_id'] for ep in episodes]}")
    if (meta["attempts"], meta["discarded"]) != (len(PLAN), len(PLAN) - len(kept)):
        problems.append(f"attempts {meta['attempts']}, discarded {meta['discarded']}")
    for r in rows:
        if (r["key"] == "Enter") != (r["label"] == "success") or r["by"] != "key":
            problems.append(f"episode {r['episode']}: {r['key']} pressed, labelled {r['label']} by {r['by']}")
        if abs(r["steps"] - r["steered_steps"]) > 5:  # the wait before ready or a time-out would show here
            problems.append(f"episode {r['episode']}: {r['steps']} steps for {r['steered_steps']} steered")
    return {"episodes": rows, "attempts": meta["attempts"], "discarded": meta["discarded"], "problems": problems}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/keyboard_session.zarr"))
    parser.add_argument("--result", default=None, help="where to write the result JSON (default: results/)")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is not installed (apt-get install tmux)")
    play(args.out)
    figures = check(args.out)
    table = Table("10 keyboard demos of PickCube recorded in tmux: each attempt after a 2 s wait, then ready, "
                  "steering, and the key that ends it (two attempts re-recorded with Backspace)",
                  ["episode", "key pressed", "label", "labelled by", "steps", "steps steered (20 Hz)"])
    for r in figures["episodes"]:
        table.add(r["episode"], r["key"], r["label"], r["by"], r["steps"], r["steered_steps"])
    print(f"results: {write_result('keyboard_session', figures, args.result, tables=[table])}")
    if figures["problems"]:
        sys.exit("problems: " + "; ".join(figures["problems"]))


if __name__ == "__main__":
    main()
