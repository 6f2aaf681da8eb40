"""The operator view on its own: a saved recording read back with rerun's own reader has every stream with one row
per frame; frames beyond ``max_queue`` are dropped and counted while the view's thread is behind, never waited for;
episode ends and events are never dropped; the config refuses what it cannot do."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import robot_rl.view.config as view_config
from robot_rl.view.config import ViewConfig
from robot_rl.view.live import OperatorView, ViewFrame, ViewUnavailableError

pytest.importorskip("rerun")
from robot_rl.view.recording import read_recording  # noqa: E402  (needs rerun)

pytestmark = pytest.mark.timeout(60)


def frame(k: int, control: str = "policy", **kw) -> ViewFrame:
    image = np.full((24, 32, 3), k, np.uint8)
    return ViewFrame(control, episode_s=0.05 * k, step=k, cameras={"front": image, "wrist": image[::2]},
                     policy_action=np.full(4, 0.1 * k), person_action=np.zeros(4), reward=float(k), success=k == 9,
                     seconds_left=10.0 - 0.05 * k, progress={"env_steps": 100 + k}, **kw)


def test_a_saved_episode_reads_back_stream_by_stream(tmp_path: Path) -> None:
    view = OperatorView(ViewConfig(enabled=True, live="none"), "robot_rl test", tmp_path)
    view.begin_episode("episode_00000")
    view.frame(ViewFrame("waiting", 0.0))  # the operator getting ready: no step recorded
    for k in range(10):
        view.frame(frame(k, "person" if 3 <= k < 6 else "policy"))
    view.end_episode("success (labelled by the operator)")
    view.begin_episode("episode_00001")
    view.frame(frame(0))
    view.close()
    assert view.files == [tmp_path / "episode_00000.rrd", tmp_path / "episode_00001.rrd"]
    assert view.dropped == 0 and view.shown == 12
    rec = read_recording(view.files[0])
    lengths = {entity: len(series) for entity, series in rec.items()}
    batches = lengths.pop("progress/env_steps")  # progress is logged once per batch of frames (view.batch_s)
    assert lengths == {"camera/front": 10, "camera/wrist": 10, "action/policy": 10, "action/person": 10,
                       "control/person": 11, "reward": 10, "success": 10, "time/episode_s": 11, "time/left_s": 10,
                       "episode/step": 10, "events": 5}
    assert 1 <= batches <= 11 and rec["progress/env_steps"].scalars().ravel()[-1] == 109
    assert rec["events"].values == ["waiting for the operator's ready", "the policy acts", "the person steers",
                                    "the policy acts", "success (labelled by the operator)"]
    assert list(rec["events"].frames) == [0, 1, 4, 7, 10]  # on the frame where it happened
    assert np.array_equal(rec["control/person"].scalars().ravel(), [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0])
    assert np.array_equal(rec["episode/step"].scalars().ravel(), np.arange(10))
    assert np.allclose(rec["action/policy"].scalars()[7], 0.7) and rec["action/policy"].scalars().shape == (10, 4)
    assert rec["camera/front"].values[4].shape == (24, 32, 3) and rec["camera/front"].values[4][0, 0, 0] == 4
    assert rec["camera/wrist"].values[0].shape == (12, 32, 3)
    assert rec["success"].scalars().ravel()[-1] == 1.0
    assert {k: len(s) for k, s in read_recording(view.files[1]).items()}["episode/step"] == 1


def test_frames_are_dropped_not_waited_for_while_the_view_is_behind(tmp_path: Path) -> None:
    cfg = ViewConfig(enabled=True, live="none", streams=("control",), max_queue=4)
    view = OperatorView(cfg, "robot_rl test", tmp_path)
    stuck, logged = threading.Event(), []
    slow = view._log_frames

    def log_frames(frames: list[ViewFrame]) -> None:  # a viewer that stalls: the thread blocks on its first batch
        stuck.wait(10)
        logged.extend(f.step for f in frames)
        slow(frames)
    view._log_frames = log_frames  # type: ignore[method-assign]
    view.begin_episode("episode_00000")
    t0 = time.perf_counter()
    accepted = [view.frame(frame(k)) for k in range(10)]
    took = time.perf_counter() - t0
    view.event("a label is never dropped")
    view.end_episode("the end is never dropped")
    assert accepted == [True] * 4 + [False] * 6 and view.dropped == 6
    assert took < 0.5  # the loop did not wait for the stalled view
    stuck.set()
    view.close()
    assert logged == [0, 1, 2, 3]
    rec = read_recording(view.files[0])
    assert len(rec["control/person"]) == 4
    assert rec["events"].values[-2:] == ["a label is never dropped", "the end is never dropped"]


def test_config_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="view.streams"):
        ViewConfig(streams=("cameras", "audio")).validate()
    with pytest.raises(ValueError, match="nothing to do"):
        ViewConfig(enabled=True, live="none", save=False).validate()
    with pytest.raises(ValueError, match="max_queue"):
        ViewConfig(max_queue=0).validate()


def test_a_rerun_release_the_view_does_not_run_on_is_refused_by_name(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    installed = {"rerun-sdk": "0.22.1"}

    def version(name: str) -> str:
        if name not in installed:
            raise view_config.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(view_config, "version", version)
    with pytest.raises(ViewUnavailableError, match=r"rerun-sdk >= 0.24, < 0.50; 0.22.1 is installed"):
        OperatorView(ViewConfig(enabled=True, live="none"), "robot_rl test", tmp_path)
    installed["rerun-sdk"] = "0.50.0"
    assert "0.50.0 is installed" in view_config.rerun_unusable()
    installed.clear()
    assert "needs rerun-sdk" in view_config.rerun_unusable()
    for fine in ("0.24.0", "0.26.2", "0.41.0", "0.49.9"):
        installed["rerun-sdk"] = fine
        assert view_config.rerun_unusable() is None


def test_the_refused_range_is_the_view_extras_range() -> None:
    import tomllib

    extra = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    (lo_major, lo_minor), (hi_major, hi_minor) = view_config.RERUN_VERSIONS
    assert extra["project"]["optional-dependencies"]["view"] == [
        f"rerun-sdk>={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"]


def test_no_display_means_no_viewer_but_recordings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    view = OperatorView(ViewConfig(enabled=True, live="spawn"), "robot_rl test", tmp_path)
    assert view.url is None  # headless: nothing spawned (a viewer would die without a window)
    view.begin_episode("e")
    view.frame(frame(0))
    view.close()
    assert len(read_recording(tmp_path / "e.rrd")["episode/step"]) == 1
