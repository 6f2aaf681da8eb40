"""Every error about a file names the file and the cause: a missing, empty, invalid or unreadable config, and a full
disk whose error does not say which file it was writing."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl.config import ConfigError, read_yaml
from robot_rl.utils.disk import describe, disk_full_error, naming
from robot_rl.utils.state_io import atomic_write

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("content, cause", [
    (None, "config file not found"),
    ("", "the file is empty"),
    ("  \n", "the file is empty"),
    ("agent: {utd: 2\nseed: 1\n", "not valid YAML at line"),
    ("- a\n- b\n", "top level must be a mapping"),
])
def test_a_config_file_error_names_the_file_and_the_cause(tmp_path, content, cause):
    path = tmp_path / "run.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=cause) as err:
        read_yaml(path)
    assert str(path) in str(err.value)


def test_an_unreadable_config_names_the_file_and_the_cause(tmp_path, monkeypatch):
    path = tmp_path / "run.yaml"
    path.write_text("seed: 1\n")

    def denied(self, *args, **kwargs):  # the tests run as root, whom chmod does not stop
        raise PermissionError(errno.EACCES, "Permission denied", str(self))
    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ConfigError, match="run.yaml: cannot be read \\(Permission denied\\)"):
        read_yaml(path)


def test_a_resumed_run_with_a_broken_config_stops_with_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("agent: {utd: 2\n")
    out = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", "--resume", str(run)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr
    assert f"{run / 'config.yaml'}: not valid YAML at line" in out.stderr, out.stderr


def test_a_full_disk_error_carries_the_file_being_written(tmp_path):
    target = tmp_path / "counters.json"

    def full(tmp: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # what write() raises: no file name
    with pytest.raises(OSError) as err:
        atomic_write(target, full)
    assert describe(disk_full_error(err.value)) == f"{target}: No space left on device"
    assert not list(tmp_path.iterdir())  # no temporary file left behind

    with pytest.raises(RuntimeError), naming(target):  # not a full disk: left as it was
        raise RuntimeError("other")
    with pytest.raises(OSError) as err, naming(target):  # safetensors reports the OS error in its message only
        raise Exception("I/O error: No space left on device (os error 28)")
    assert err.value.filename == str(target) and err.value.errno == errno.ENOSPC
