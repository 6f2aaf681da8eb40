"""Frames datasets: writing (atomic), loading (checked), and the keys mode's labelling with device events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from robot_rl.rewards.frames import FramesError, FrameWriter, SimFramesConfig, load_frames, record_key_frames
from tests.rewards.helpers import BrightnessEnv, ScriptedKeys

pytestmark = pytest.mark.timeout(30)

CAMS = {"front": (8, 8, 3), "wrist": (8, 8, 3)}


def frame(v: int) -> dict[str, np.ndarray]:
    return {c: np.full(s, v, np.uint8) for c, s in CAMS.items()}


def test_writer_round_trip_is_atomic(tmp_path: Path) -> None:
    out = tmp_path / "f.zarr"
    w = FrameWriter(out, CAMS, {"mode": "test"})
    for i in range(150):  # more than one chunk
        w.add(frame(i), label=i % 3 == 0, episode=i // 50, step=i % 50, env_success=None if i < 10 else i % 2 == 0)
    assert not out.exists()  # nothing at the target until it is complete
    assert w.publish() == out
    assert not list(tmp_path.glob(".f.zarr.tmp-*"))
    data = load_frames(out)
    assert len(data) == 150 and data.meta["mode"] == "test" and data.meta["episodes"] == 3
    assert data.pixels["wrist"][77, 0, 0, 0] == 77 and data.pixels["front"].shape == (150, 8, 8, 3)
    assert data.labels.tolist() == [i % 3 == 0 for i in range(150)]
    assert data.episodes.tolist() == [i // 50 for i in range(150)]
    assert data.env_success[:10].tolist() == [-1] * 10 and data.env_success[10] == 1 and data.env_success[11] == 0
    assert set(load_frames(out, ("front",)).pixels) == {"front"}
    with pytest.raises(FileExistsError, match="already exists"):
        FrameWriter(out, CAMS, {})
    FrameWriter(out, CAMS, {}, overwrite=True).discard()  # overwrite allowed, discard leaves nothing behind
    assert not list(tmp_path.glob(".f.zarr.tmp-*")) and len(load_frames(out)) == 150


def test_writer_rejects_bad_frames(tmp_path: Path) -> None:
    w = FrameWriter(tmp_path / "f.zarr", CAMS, {})
    with pytest.raises(FramesError, match="no camera 'wrist'"):
        w.add({"front": np.zeros((8, 8, 3), np.uint8)}, True, 0, 0)
    with pytest.raises(FramesError, match="expected uint8"):
        w.add({"front": np.zeros((8, 8, 3), np.float32), "wrist": np.zeros((8, 8, 3), np.uint8)}, True, 0, 0)
    with pytest.raises(FramesError, match="no frames"):
        w.publish()
    w.discard()
    with pytest.raises(FramesError, match="no cameras"):
        FrameWriter(tmp_path / "g.zarr", {}, {})


def test_load_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FramesError, match="no frames dataset"):
        load_frames(tmp_path / "missing.zarr")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w", attributes={"format": "robot_rl.replay"})
    with pytest.raises(FramesError, match="not a reward frames dataset"):
        load_frames(tmp_path / "other.zarr")
    (tmp_path / "plain").mkdir()
    with pytest.raises(FramesError):
        load_frames(tmp_path / "plain")
    w = FrameWriter(tmp_path / "f.zarr", CAMS, {})
    w.add(frame(1), True, 0, 0)
    w.flush()
    with pytest.raises(FramesError, match="incomplete"):
        load_frames(w.tmp)  # a recording that never finished
    w.publish()
    with pytest.raises(FramesError, match=r"no camera\(s\) \['side'\]"):
        load_frames(tmp_path / "f.zarr", ("side",))


def test_keys_mode_labels_follow_the_device_events(tmp_path: Path) -> None:
    env = BrightnessEnv(list(range(10, 200, 10)), env_success=[False] * 19)
    script = [
        (True, ()),              # frame: failure (the initial label), the human steers
        (True, ("success",)),    # frame: success
        (False, ()),             # frame: success (still), robot held
        (False, ("pause",)),     # paused: no frame
        (False, ()),             # paused: no frame
        (False, ("pause",)),     # resumed: frame, success
        (False, ("failure",)),   # frame: failure
        (False, ("reset",)),     # new episode, no step
        (True, ()),              # frame: failure, episode 1
    ]
    stats = record_key_frames(env, ScriptedKeys(script), tmp_path / "k.zarr", max_frames=6, progress=False)
    data = load_frames(tmp_path / "k.zarr")
    assert stats.frames == 6 and len(data) == 6
    assert data.labels.tolist() == [False, True, True, True, False, False]
    assert data.episodes.tolist() == [0, 0, 0, 0, 0, 1]
    assert data.env_success.tolist() == [0] * 6  # the env reported is_success: kept for comparison
    assert data.meta["mode"] == "keys" and env.resets == 2
    moved = [float(a[0]) for a in env.actions]
    assert moved[:2] == [0.5, 0.5] and moved[2] == 0.0  # device action while active, hold action otherwise


def test_keys_mode_ctrl_c_keeps_what_was_labelled(tmp_path: Path) -> None:
    env = BrightnessEnv([50] * 30)
    device = ScriptedKeys([(True, ("success",))] + [(True, ())] * 10, interrupt_after=4)
    stats = record_key_frames(env, device, tmp_path / "k.zarr", max_frames=100, progress=False)
    assert stats.frames == 4 and load_frames(tmp_path / "k.zarr").labels.all()


def test_sim_config_validation() -> None:
    for bad in (dict(episodes=0), dict(image_size=4), dict(perturb_max=1.5), dict(segment_steps=(5, 2)),
                dict(noise_max=-1.0)):
        with pytest.raises(ValueError, match="record-frames"):
            SimFramesConfig(**bad).validate()
