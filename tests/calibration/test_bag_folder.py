"""Calibration reads the bag a person points at: the bag itself, or the folder ``robot-rl record-excitation
--out`` named (its one bag inside); anything else is one clear line, not a rosbags traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from robot_rl.datasets.bag_demos import one_bag


def _bag(folder):
    folder.mkdir(parents=True)
    (folder / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
    return folder


def test_the_bag_or_the_recording_folder_around_it(tmp_path) -> None:
    bag = _bag(tmp_path / "log" / "episode_000000")
    assert one_bag(bag, "calibrate") == bag
    assert one_bag(tmp_path / "log", "calibrate") == bag
    _bag(tmp_path / "log" / "episode_000001")
    with pytest.raises(ValueError, match="holds 2 bags"):
        one_bag(tmp_path / "log", "calibrate")
    with pytest.raises(ValueError, match="no bag at"):
        one_bag(tmp_path / "nowhere", "calibrate")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a rosbag2 bag"):
        one_bag(tmp_path / "empty", "calibrate-car")


@pytest.mark.parametrize("command", ["calibrate", "calibrate-car"])
def test_a_folder_without_a_bag_is_one_line(tmp_path, command: str) -> None:
    done = subprocess.run([sys.executable, "-m", "robot_rl.cli", command, "--bag", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "not a rosbag2 bag" in done.stderr, done.stderr[-2000:]
