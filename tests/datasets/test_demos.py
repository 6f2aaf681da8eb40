"""Scripted demo datasets: recording, the replay format (frames once, labels), reproducibility, generation on
first use (atomic, crash leftovers), videos (GIF/MP4, stored pixels and re-simulation) and the CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from robot_rl.cli import main as cli_main
from robot_rl.datasets import dataset_name, dataset_stats, ensure_demos, read_meta, record_demos, render_episode
from robot_rl.datasets.record import episode_seed, remove_stale_temps
from robot_rl.replay import ReplayBuffer
from robot_rl.replay.rows import SOURCE_CODE
from robot_rl.replay.store import add_dataset, load_transitions
from robot_rl.utils.video import read_video, write_video

REACH, PICK = "robot_rl/Reach-v0", "robot_rl/PickCube-v0"
N = 3


@pytest.fixture(scope="module")
def reach(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reach") / "reach.zarr"
    stats = record_demos(REACH, N, path, seed=0, progress=False)
    assert stats.episodes == N and stats.path == path and stats.transitions > 0
    return path


@pytest.fixture(scope="module")
def pick(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pick") / "pick.zarr"
    record_demos(PICK, N, path, seed=1, env_kwargs={"image_size": 32}, progress=False)
    return path


def _episodes(arrays: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """episode id -> its transition rows in step order."""
    valid = np.flatnonzero(arrays["valid"])
    return {int(e): valid[arrays["episode_id"][valid] == e] for e in np.unique(arrays["episode_id"][valid])}


def test_reach_state_dataset_loads_with_labels(reach: Path) -> None:
    spec, action_dim, arrays = load_transitions(reach)
    meta = read_meta(reach)
    assert spec.cameras == {} and action_dim == 4 and meta["complete"] and meta["env_id"] == REACH
    episodes = _episodes(arrays)
    lengths = [len(rows) for rows in episodes.values()]
    assert sorted(episodes) == list(range(N)) and lengths == [e["length"] for e in meta["episodes"]]
    # Every observation stored once: an episode of T steps takes T + 1 rows.
    assert len(arrays["valid"]) == sum(lengths) + N
    assert np.all(arrays["source"][arrays["valid"]] == SOURCE_CODE["demo"])
    for e, rows in episodes.items():
        assert np.array_equal(arrays["step"][rows], np.arange(len(rows)))
        assert np.array_equal(arrays["next_row"][rows[:-1]], rows[1:])  # next obs of t is obs of t + 1
        assert arrays["terminated"][rows[-1]] and not arrays["terminated"][rows[:-1]].any()
        assert arrays["reward"][rows].sum() == 1.0  # sparse reward: 1 at the successful last step
        assert meta["episodes"][e]["success"] and meta["episodes"][e]["reset_seed"] == episode_seed(0, e)
    stats = dataset_stats(reach)
    assert [(s["length"], s["success"], s["return"]) for s in stats] == [(n, True, 1.0) for n in lengths]
    # Episodes differ from each other (different targets and noise).
    first = [arrays["action"][rows] for rows in episodes.values()]
    assert not any(np.array_equal(first[i][:5], first[j][:5]) for i in range(N) for j in range(i + 1, N))
    buffer = ReplayBuffer(spec, action_dim)
    assert add_dataset(buffer, str(reach)) == sum(lengths)
    batch = buffer.sample(16, mix={"prior": 1.0})
    assert batch["obs"]["state"].shape == (16, spec.state_dim) and np.all(batch["source"] == SOURCE_CODE["demo"])


def test_noise_changes_actions_not_starts(reach: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean.zarr"
    record_demos(REACH, 1, clean, noise=0.0, seed=0, progress=False)
    _, _, noisy = load_transitions(reach)
    _, _, quiet = load_transitions(clean)
    assert np.array_equal(noisy["state"][0], quiet["state"][0])  # same reset seed, same start
    a, b = _episodes(noisy)[0], _episodes(quiet)[0]
    k = min(len(a), len(b))  # the first actions saturate at the action bound; later ones carry the noise
    assert not np.allclose(noisy["action"][a[:k], :3], quiet["action"][b[:k], :3], atol=1e-3)


def test_same_seed_same_dataset(reach: Path, tmp_path: Path) -> None:
    again, other = tmp_path / "again.zarr", tmp_path / "other.zarr"
    record_demos(REACH, N, again, seed=0, progress=False)
    record_demos(REACH, N, other, seed=1, progress=False)
    _, _, a = load_transitions(reach)
    _, _, b = load_transitions(again)
    _, _, c = load_transitions(other)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert read_meta(reach)["episodes"] == read_meta(again)["episodes"]
    assert not np.array_equal(a["state"][:1], c["state"][:1])
    with pytest.raises(FileExistsError):
        record_demos(REACH, 1, again, progress=False)


def test_pickcube_pixels_stored_once(pick: Path) -> None:
    spec, action_dim, arrays = load_transitions(pick)
    assert spec.cameras == {"front": (32, 32, 3), "wrist": (32, 32, 3)}
    episodes = _episodes(arrays)
    transitions = sum(len(r) for r in episodes.values())
    for cam in spec.cameras:
        assert arrays[f"pixels/{cam}"].shape == (transitions + N, 32, 32, 3)  # T + 1 frames per episode
    assert all(e["success"] for e in read_meta(pick)["episodes"])
    buffer = ReplayBuffer(spec, action_dim)
    assert add_dataset(buffer, str(pick)) == transitions
    batch = buffer.sample(8, mix={"prior": 1.0})
    assert batch["next_obs"]["pixels"]["front"].shape == (8, 32, 32, 3)
    assert batch["obs"]["pixels"]["front"].dtype == np.uint8 and batch["obs"]["pixels"]["front"].any()


def test_write_video_gif_and_mp4(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (7, 33, 47, 3), dtype=np.uint8)  # distinct frames, odd sides
    gif = read_video(write_video(frames, tmp_path / "v.gif", fps=20))
    assert gif.shape == (7, 33, 47, 3)
    mp4 = read_video(write_video(list(frames), tmp_path / "v.mp4", fps=20))
    assert mp4.shape == (7, 34, 48, 3)  # yuv420p: padded to even sides
    with pytest.raises(ValueError, match="suffix"):
        write_video(frames, tmp_path / "v.avi", fps=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.gif", "v.mp4"]  # no temporary files left


def test_render_episode_from_pixels_and_by_resimulation(pick: Path, reach: Path, tmp_path: Path) -> None:
    import imageio.v3 as iio

    length = dataset_stats(pick)[1]["length"]
    info = render_episode(pick, 1, tmp_path / "pick.mp4")
    assert info["source"] == "pixels" and info["frames"] == length + 1
    video = read_video(tmp_path / "pick.mp4")
    assert video.shape == (length + 1, 32, 64, 3)  # both cameras side by side
    _, _, arrays = load_transitions(pick)
    rows = _episodes(arrays)[1]
    assert np.abs(video[0, :, :32].astype(int) - arrays["pixels/front"][rows[0]]).mean() < 12  # lossy codec
    info = render_episode(pick, 1, tmp_path / "wrist.gif", camera="wrist", scale=2)
    gif = read_video(tmp_path / "wrist.gif")
    assert gif.shape[1:] == (64, 64, 3) and 1 < len(gif) <= length + 1  # GIF merges identical frames ...
    durations = [iio.immeta(tmp_path / "wrist.gif", index=i)["duration"] for i in range(len(gif))]
    assert sum(durations) == 50 * (length + 1)  # ... but keeps the playing time (20 fps)
    # State-only dataset: re-simulated from the recorded reset seed and actions, exactly.
    length = dataset_stats(reach)[0]["length"]
    info = render_episode(reach, 0, tmp_path / "reach.gif", size=48)
    assert info["source"] == "resimulated" and info["max_state_error"] < 1e-6 and info["frames"] == length + 1
    assert read_video(tmp_path / "reach.gif").shape[1:] == (48, 96, 3)
    with pytest.raises(ValueError, match="no episode 99"):
        render_episode(reach, 99, tmp_path / "x.gif")


def test_ensure_demos_generates_once_and_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import robot_rl.datasets.record as record

    path = ensure_demos("reach", 2, seed=3, root=tmp_path)
    assert path == tmp_path / "Reach-v0-2-seed3.zarr" and read_meta(path)["complete"]
    stamps = {p: p.stat().st_mtime_ns for p in path.rglob("*")}

    def no_recording(*args, **kwargs):
        raise AssertionError("ensure_demos re-recorded an existing dataset")

    monkeypatch.setattr(record, "record_demos", no_recording)
    assert ensure_demos(REACH, 2, seed=3, root=tmp_path) == path
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*")} == stamps
    assert dataset_name(REACH, 2, 3, {"image_size": 32}) != dataset_name(REACH, 2, 3)
    (tmp_path / "Reach-v0-5-seed3.zarr").mkdir()  # something else at the path: an error, never reused
    with pytest.raises(ValueError, match="not a complete 5-episode"):
        ensure_demos(REACH, 5, seed=3, root=tmp_path)


def test_failure_mid_recording_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from robot_rl.replay.store import EpisodeWriter

    calls = []
    append = EpisodeWriter.append

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return append(self, *args, **kwargs)

    monkeypatch.setattr(EpisodeWriter, "append", failing)
    with pytest.raises(KeyboardInterrupt):
        ensure_demos(REACH, 3, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_killed_recording_leftover_is_replaced(tmp_path: Path) -> None:
    """A recording killed with SIGKILL leaves its temporary folder (one committed episode, a store that loads),
    never a dataset at the target; the next ensure_demos ignores that leftover, removes it and records anew."""
    script = textwrap.dedent(f"""
        import os, signal
        from robot_rl.replay.store import EpisodeWriter
        from robot_rl.datasets import ensure_demos
        append = EpisodeWriter.append
        def dying(self, *a, **k):
            if self.num_episodes == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return append(self, *a, **k)
        EpisodeWriter.append = dying
        ensure_demos("robot_rl/Reach-v0", 3, root={str(tmp_path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "MUJOCO_GL": "egl"}, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    target = tmp_path / "Reach-v0-3-seed0.zarr"
    (leftover,) = tmp_path.iterdir()
    assert not target.exists() and leftover.name.startswith(f".{target.name}.tmp-{socket.gethostname()}-")
    assert load_transitions(leftover)[2]["valid"].sum() > 0 and not read_meta(leftover)["complete"]
    foreign = tmp_path / f".{target.name}.tmp-otherhost-1-abc"  # another machine's: left alone
    shutil.copytree(leftover, foreign)
    path = ensure_demos(REACH, 3, root=tmp_path)
    assert path == target and len(dataset_stats(path)) == 3 and read_meta(path)["complete"]
    assert sorted(tmp_path.iterdir()) == sorted([target, foreign])
    assert remove_stale_temps(target) == []


def test_cli_record_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.zarr"
    # Without the teleop extra (the lowest-versions leg) the SpaceMouse fails one step earlier, as clearly.
    no_mouse = "no 3Dconnexion SpaceMouse found" if importlib.util.find_spec("hid") else "hidapi is not installed"
    for device, message in [("spacemouse", no_mouse), ("joystick", "unknown device")]:
        assert cli_main(["record-demos", "reach", "--device", device, "-n", "1", "--out", str(out)]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    assert cli_main(["record-demos", "nosuchtask", "--out", str(out)]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert cli_main(["record-demos", "reach", "-n", "2", "--out", str(out), "--no-progress", "--seed", "5"]) == 0
    assert "2 demos of robot_rl/Reach-v0" in capsys.readouterr().out
    assert json.loads((out / "dataset.json").read_text())["seed"] == 5
    # env kwargs (a robot env's profile, here a sim task's option) reach the env and the dataset's metadata
    wrench = tmp_path / "wrench.zarr"
    assert cli_main(["record-demos", "reach", "-n", "1", "--out", str(wrench), "--no-progress",
                     "--env-kwargs", '{"include_wrench": true}']) == 0
    capsys.readouterr()
    meta = json.loads((wrench / "dataset.json").read_text())
    assert meta["env_kwargs"] == {"include_wrench": True}, meta
    with pytest.raises(SystemExit) as bad:  # refused while parsing, as every malformed flag is
        cli_main(["record-demos", "reach", "--out", str(wrench), "--env-kwargs", "[1]"])
    assert bad.value.code == 2 and "expected a JSON object" in capsys.readouterr().err
    assert cli_main(["record-demos", "reach", "-n", "2", "--out", str(out), "--no-progress"]) == 2
    assert "already exists" in capsys.readouterr().err
    video = tmp_path / "ep.gif"
    assert cli_main(["demos", "show", str(out), "--episode", "1", "--video", str(video), "--size", "32"]) == 0
    printed = capsys.readouterr().out
    assert "success 100 %" in printed and "re-simulated" in printed and video.is_file()
    assert cli_main(["demos", "show", str(tmp_path / "missing.zarr")]) == 2


def test_a_full_disk_while_writing_a_video_is_one_message_and_no_file(tmp_path: Path) -> None:
    """``demos show --video`` (the video path of ``eval --video`` too) under a file-size limit, the path a full
    disk takes: exit 3, one message naming the file, no traceback, neither the video nor its temporary file left."""
    import resource

    out = tmp_path / "d.zarr"
    assert cli_main(["record-demos", "reach", "-n", "1", "--out", str(out), "--no-progress"]) == 0
    video = tmp_path / "v.mp4"
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))  # noqa: E731 - the child's own limit
    done = subprocess.run([sys.executable, "-m", "robot_rl.cli", "demos", "show", str(out), "--episode", "0",
                           "--video", str(video), "--size", "256"], capture_output=True, text=True, timeout=300,
                          preexec_fn=limit, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 3, done.stderr[-2000:]
    assert f"robot-rl demos: stopped, the disk is full ({video}: File too large)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.glob("*.mp4")) == [] and list(tmp_path.glob(".*")) == []
