"""Recording demos from a person: the real keyboard device on a pty (the test types on the master side) drives
PickCube through record_demos; keys label success / failure, discard an attempt, pause; the dataset round-trips
(zarr -> load_transitions / ReplayBuffer / re-simulation), shows per-episode stats, and can be edited; the operator
view's recording of each attempt reads back with rerun's reader."""

from __future__ import annotations

import os
import queue
import threading
import time
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from robot_rl.cli import main as cli_main
from robot_rl.datasets import dataset_stats, read_meta, record_demos, render_episode
from robot_rl.replay import ReplayBuffer
from robot_rl.replay.store import add_dataset, load_transitions
from robot_rl.teleop.config import TeleopConfig
from robot_rl.view.config import ViewConfig

pytestmark = pytest.mark.timeout(120)
PICK = "robot_rl/PickCube-v0"


def typist(master: int, scripts: dict[int, list], ready: bytes = b"g") -> tuple[callable, threading.Thread]:
    """A person at the terminal: presses ``ready`` when attempt k waits for it, and when it starts types
    ``scripts[k]`` (bytes, or a float = pause)."""
    starts: queue.Queue = queue.Queue()

    def hook(kind: str, info: dict) -> None:
        if kind == "waiting":
            starts.put(("ready", info["attempt"]))
        if kind == "episode_start":
            starts.put(("go", info["attempt"]))

    def run() -> None:
        while True:
            item = starts.get()
            if item is None:
                return
            what, attempt = item
            for item in [ready] if what == "ready" else scripts.get(attempt, []):
                if isinstance(item, float):
                    time.sleep(item)
                else:
                    os.write(master, item)
                    time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    hook.stop = lambda: starts.put(None)  # type: ignore[attr-defined]
    return hook, thread


def rows_of(arrays: dict[str, np.ndarray], episode: int) -> np.ndarray:
    rows = np.flatnonzero(arrays["valid"] & (arrays["episode_id"] == episode))
    return rows[np.argsort(arrays["step"][rows])]


def test_keyboard_recording_round_trip(pty, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the stats table unwrapped
    master, slave = pty
    cfg = TeleopConfig(device="keyboard", device_path=os.ttyname(slave), key_hold_s=0.15)
    hook, thread = typist(master, {
        0: [b"w"] * 8 + [0.25, b"\r"],  # forward, let go, Enter: success
        1: [b"r"] * 3 + [0.3, b"\x7f"],  # up, let go, then Backspace: discard this attempt
        2: [b"a"] * 4 + [b"p", 0.5, b"p"] + [b"a"] * 2 + [b"x"],  # left, pause 0.5 s, resume, left, x: failure
    })
    out = tmp_path / "human.zarr"
    view = ViewConfig(enabled=True, live="none", max_queue=100_000) if find_spec("rerun") else None
    try:
        stats = record_demos(PICK, 2, out, device="keyboard", teleop=cfg, only_successes=False, progress=False,
                             on_event=hook, view=view)
    finally:
        hook.stop()
        thread.join(5)
    assert (stats.episodes, stats.attempts, stats.discarded, stats.successes) == (2, 3, 1, 1)
    meta = read_meta(out)
    assert meta["device"] == "keyboard" and meta["noise"] is None and meta["rate_hz"] == 20
    assert meta["teleop"]["key_hold_s"] == 0.15 and meta["complete"]
    first, second = meta["episodes"]
    assert (first["success"], first["label"], second["success"], second["label"]) == (True, "key", False, "key")
    assert second["held_steps"] >= 5 and first["held_steps"] == 0  # paused ~0.5 s at 20 Hz: nothing recorded
    spec, action_dim, arrays = load_transitions(out)
    assert action_dim == 4 and sorted(np.unique(arrays["episode_id"][arrays["valid"]])) == [0, 1]
    ep0, ep1 = rows_of(arrays, 0), rows_of(arrays, 1)
    assert len(ep0) == first["length"] and len(ep1) == second["length"]
    forward = np.all(arrays["action"][ep0] == [1, 0, 0, -1], axis=1).sum()
    left = np.all(arrays["action"][ep1] == [0, 1, 0, -1], axis=1).sum()
    assert forward >= 5 and left >= 4  # the keys really steered
    assert not np.any(arrays["action"][ep0][:, 1:3]) and not np.any(arrays["action"][ep1][:, [0, 2]])
    assert arrays["terminated"][ep0[-1]] and arrays["reward"][ep0[-1]] == 1.0  # the success label
    assert arrays["terminated"][ep1[-1]] and arrays["reward"][ep1].sum() == 0.0
    buffer = ReplayBuffer(spec, action_dim)
    assert add_dataset(buffer, str(out)) == len(ep0) + len(ep1)
    # The sim stood still while paused, so replaying the stored actions from the reset seed is exact.
    info = render_episode(out, 1, tmp_path / "ep1.gif", size=32)
    assert info["source"] == "resimulated" and info["max_state_error"] < 1e-6
    stats_rows = dataset_stats(out)
    assert [(s["success"], s["label"], s["held_steps"] > 0) for s in stats_rows] == [(True, "key", False),
                                                                                    (False, "key", True)]
    assert cli_main(["demos", "show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "label" in shown and "held" in shown and "device=keyboard at 20 Hz" in shown and "1 discarded" in shown
    # Discarding afterwards: episode 0 goes, episode 1 keeps its id, frames and label.
    assert cli_main(["demos", "discard", str(out), "0"]) == 0
    _, _, after = load_transitions(out)
    assert np.array_equal(after["action"][rows_of(after, 1)], arrays["action"][ep1])
    assert [e["episode_id"] for e in read_meta(out)["episodes"]] == [1] and read_meta(out)["discarded"] == 2
    assert cli_main(["demos", "discard", str(out), "7"]) == 2 and "no episode(s) [7]" in capsys.readouterr().err
    if view is not None:
        check_attempt_recordings(out.with_suffix(".view"), arrays, (first, second))


def check_attempt_recordings(folder: Path, arrays: dict[str, np.ndarray], kept: tuple[dict, dict]) -> None:
    """The operator view's recordings of the three attempts, read back with rerun's reader: the wait for the ready
    key, the person's actions step for step as the dataset holds them, the pause, and how each attempt ended."""
    from robot_rl.view.recording import read_recording

    assert sorted(p.name for p in folder.iterdir()) == [f"attempt_{k:05d}.rrd" for k in range(3)]
    recs = [read_recording(folder / f"attempt_{k:05d}.rrd") for k in range(3)]
    for rec, meta, episode in ((recs[0], kept[0], 0), (recs[2], kept[1], 1)):
        steps, person = rec["episode/step"], rec["action/person"]
        assert np.array_equal(steps.scalars().ravel(), np.arange(meta["length"]))
        shown = np.stack([v for f, v in zip(person.frames, person.values, strict=True) if f in set(steps.frames)])
        assert np.array_equal(shown, arrays["action"][rows_of(arrays, episode)])  # what the person did, step by step
        waited = int(np.sum(rec["control/person"].frames < steps.frames[0]))
        assert waited >= 1 and rec["events"].values[0] == "waiting for the operator's ready"
        assert len(rec["control/person"]) == waited + meta["length"] + meta["held_steps"]  # held periods shown too
        assert "the person steers" in rec["events"].values
    assert recs[0]["events"].values[-1] == f"attempt 0: success (the operator's label), {kept[0]['length']} steps, kept"
    assert recs[1]["events"].values[-1].startswith("attempt 1: to record again") and "not kept" in \
        recs[1]["events"].values[-1]
    assert "held (paused or device gone)" in recs[2]["events"].values
    assert recs[2]["events"].values[-1] == f"attempt 2: failure (the operator's label), {kept[1]['length']} steps, kept"


def test_ctrl_c_keeps_the_demos_recorded(pty, tmp_path: Path) -> None:
    master, slave = pty
    cfg = TeleopConfig(device="keyboard", device_path=os.ttyname(slave), key_hold_s=0.15)
    hook, thread = typist(master, {0: [b"d"] * 3 + [b"\r"]})

    def interrupt_second(kind: str, info: dict) -> None:
        hook(kind, info)
        if kind == "episode_start" and info["attempt"] == 1:
            raise KeyboardInterrupt  # the operator has had enough
    out = tmp_path / "stopped.zarr"
    try:
        stats = record_demos(PICK, 5, out, device="keyboard", teleop=cfg, progress=False, on_event=interrupt_second)
    finally:
        hook.stop()
        thread.join(5)
    meta = read_meta(out)
    assert stats.episodes == 1 and meta["interrupted"] and meta["complete"] and meta["episodes"][0]["success"]
    assert load_transitions(out)[2]["valid"].sum() == meta["episodes"][0]["length"]


def test_a_stalled_robot_is_waited_for_and_the_attempt_recorded_again(pty, tmp_path: Path, caplog) -> None:
    from robot_rl.datasets.record import episode_seed
    from robot_rl.envs.contract import RobotUnavailable

    master, slave = pty
    cfg = TeleopConfig(device="keyboard", device_path=os.ttyname(slave), key_hold_s=0.15)
    hook, thread = typist(master, {0: [b"d"] * 3 + [b"\r"], 2: [b"d"] * 3 + [b"\r"]})

    def stall_second(kind: str, info: dict) -> None:
        hook(kind, info)
        if kind == "episode_start" and info["attempt"] == 1:
            time.sleep(0.5)  # a stall takes seconds (and the keyboard's ready key is released meanwhile)
            raise RobotUnavailable("no fresh pose within 3.0 s (robot graph stalled?)")  # mid-attempt
    out = tmp_path / "stalled.zarr"
    try:
        stats = record_demos(PICK, 2, out, device="keyboard", teleop=cfg, progress=False, on_event=stall_second)
    finally:
        hook.stop()
        thread.join(5)
    meta = read_meta(out)
    assert stats.episodes == 2 and stats.attempts == 3 and stats.discarded == 1 and "robot_lost" not in meta
    assert [e["reset_seed"] for e in meta["episodes"]] == [episode_seed(0, 0), episode_seed(0, 1)]  # same placement
    assert "the robot stopped answering" in caplog.text


def test_cli_record_from_keyboard(pty, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    master, slave = pty
    config = tmp_path / "teleop.yaml"
    config.write_text("teleop:\n  key_hold_s: 0.1\n  scale: [0.5]\n")
    stop = threading.Event()

    def person() -> None:  # keeps pushing forward and pressing Enter until the CLI is done
        while not stop.is_set():
            for key in (b"w", b"w", b"w", b"\r"):
                os.write(master, key)
                time.sleep(0.06)
            time.sleep(0.15)

    thread = threading.Thread(target=person, daemon=True)
    thread.start()
    out = tmp_path / "cli.zarr"
    try:
        code = cli_main(["record-demos", "pickcube", "--device", "keyboard", "--device-path", os.ttyname(slave),
                         "-n", "1", "--out", str(out), "--teleop-config", str(config), "--no-progress",
                         "--rate", "50"])
    finally:
        stop.set()
        thread.join(5)
    assert code == 0, capsys.readouterr().err
    meta = read_meta(out)
    assert meta["rate_hz"] == 50 and meta["env_kwargs"] == {}
    assert meta["episodes"][0]["success"] and meta["teleop"]["scale"] == [0.5]
    actions = load_transitions(out)[2]["action"]
    assert np.any(np.all(actions == [0.5, 0, 0, -1], axis=1))  # scale from the YAML
    bad = tmp_path / "bad.yaml"
    bad.write_text("teleop:\n  deadzone: 2\n")
    assert cli_main(["record-demos", "pickcube", "--device", "keyboard", "--teleop-config", str(bad),
                     "--out", str(tmp_path / "x.zarr")]) == 2
    assert "deadzone" in capsys.readouterr().err


def test_pause_on_a_robot_commands_the_hold(pty) -> None:
    """On hardware (``drives_hardware``) a pause keeps commanding the hold action every period (a robot whose
    command stream stops would trip its watchdog); nothing is recorded, the held period folds into the last
    transition's next observation."""
    from robot_rl.datasets.sources import HumanDevice, run_episode
    from robot_rl.envs.make import EnvConfig, make_env
    from robot_rl.teleop.keyboard import Keyboard

    master, slave = pty
    env = make_env(EnvConfig(id=PICK))
    env.unwrapped.drives_hardware = True  # this sim stands in for a robot env
    dev = HumanDevice("keyboard", device=Keyboard(TeleopConfig(device="keyboard", key_hold_s=0.1), 4, fd=slave))
    hook, thread = typist(master, {0: [b"w", b"p", 0.4, b"p", 0.15, b"\r"]})
    try:
        dev.start(env)
        hook("episode_start", {"attempt": 0})
        ep = run_episode(dev, env, 0, 0.02, 1.0, lambda kind, info: None)
    finally:
        hook.stop()
        thread.join(5)
        dev.close()
    assert ep.label == "key" and ep.success and ep.held_steps >= 10
    assert env.unwrapped.steps == len(ep.actions) + ep.held_steps  # the hold was commanded while paused
    assert len(ep.observations) == len(ep.actions) + 1
    np.testing.assert_array_equal(ep.observations[-1]["state"], env.unwrapped._obs()["state"])
    env.close()


@pytest.mark.timeout(240)
def test_a_person_at_the_terminal_starts_labels_records_again_and_stops(pty, tmp_path: Path) -> None:
    """``robot-rl record-demos`` as a person runs it, its terminal a pty: no attempt starts before the ready key,
    no time-out the operator did not choose (one attempt runs past the task's 5 s step limit), the labels are the
    keys pressed, an attempt recorded again leaves no trace (its placement is recorded next), stop keeps the rest."""
    import subprocess
    import sys

    from robot_rl.datasets.record import episode_seed

    master, slave = pty
    out = tmp_path / "person.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "record-demos", "pickcube", "--device", "keyboard",
                             "-n", "10", "--out", str(out), "--keep-failures", "--no-progress"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "MUJOCO_GL": "egl"})
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def wait_for(text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                seen.append(line := lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if text in line:
                return
        raise AssertionError(f"no {text!r} in: {''.join(seen)[-3000:]}")

    def press(*keys: bytes, gap: float = 0.06) -> None:
        if keys[0] in (b"g", b"q"):  # a terminal sends no key releases: the same key typed again within
            time.sleep(0.7)  # teleop.key_hold_s (0.6 s) reads as held, not as a second press
        for key in keys:
            os.write(master, key)
            time.sleep(gap)

    try:
        wait_for("attempt 0: ready? press g")
        time.sleep(1.5)  # the operator takes their time: nothing starts
        assert not any("attempt 0: go" in line for line in seen) and lines.empty()
        press(b"g")
        wait_for("attempt 0: go")
        press(*[b"w"] * 6, b"\r")  # success
        wait_for("attempt 1: ready?")
        press(b"g")
        wait_for("attempt 1: go")
        press(*[b"a"] * 4, b"\x7f")  # Backspace: record this one again
        wait_for("attempt 2: ready?")
        press(b"g")
        wait_for("attempt 2: go")
        press(*[b"d"] * 4, b"x")  # failure
        wait_for("attempt 3: ready?")
        press(b"g")
        wait_for("attempt 3: go")
        time.sleep(7.0)  # past PickCube's own limit (100 steps at 20 Hz)
        press(b"\r")
        wait_for("attempt 4: ready?")
        press(b"q")  # stop
        assert proc.wait(timeout=60) == 0, "".join(seen)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    meta = read_meta(out)
    episodes = meta["episodes"]
    assert [(e["success"], e["label"]) for e in episodes] == [(True, "key"), (False, "key"), (True, "key")]
    assert [e["reset_seed"] for e in episodes] == [episode_seed(0, k) for k in range(3)]  # no placement skipped
    assert episodes[2]["length"] > 100 and meta["stopped"] and (meta["attempts"], meta["discarded"]) == (4, 1)
    _, _, arrays = load_transitions(out)
    assert sorted(np.unique(arrays["episode_id"][arrays["valid"]])) == [0, 1, 2]
    assert arrays["valid"].sum() == sum(e["length"] for e in episodes)  # the recorded-again attempt: no rows
