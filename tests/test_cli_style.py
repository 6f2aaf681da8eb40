"""One CLI style: every `robot-rl` subcommand of the data/reward/ROS tools parses with tyro over a dataclass, so
`--help` lists each documented flag and a bad flag exits with code 2 (run as the user does: a child process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

HELP = {
    "record-demos": ["TASK", "--device", "-n", "--episodes", "--countdown", "--episode-seconds",
                     "--out", "--noise", "--seed", "--image-size",
                     "--keep-failures", "--teleop-config", "--device-path", "--rate", "--overwrite", "--no-progress"],
    "demos": ["show", "discard"],
    "demos show": ["PATH", "--episode", "--video", "--camera", "--fps", "--scale", "--size"],
    "demos discard": ["PATH", "EPISODE"],
    "record-frames": ["TASK", "--mode", "--out", "--image-size", "--cameras", "--episodes", "--max-steps",
                      "--noise-max", "--perturb-max", "--seed", "--device", "--frames", "--overwrite", "--no-progress"],
    "train-reward": ["FRAMES", "--out", "--config", "--cameras", "--epochs", "--batch-size", "--lr", "--min-precision",
                     "--pretrained", "--threads", "--device", "--seed", "--overwrite", "--no-progress"],
    "launch": ["FILE|NAME", "NAME:=VALUE", "--print", "--list"],
    "ros-index": ["PREFIX"],
    "train": ["--resume", "--checkpoint-every-s", "--progress-every-s", "--runtime.heartbeat-timeout",
              "--runtime.spool-max-mb", "lerobot:<type>:<folder>"],
    "eval": ["RUN_DIR|POLICY", "lerobot:<type>:<folder>", "--base-policy.metadata", "--env-kwargs"],
    "serve-policy": ["POLICY", "lerobot:<type>:<folder>", "--metadata", "--token-env"],
}
BAD = {  # command line -> what stderr names
    "record-demos reach --bogus 1": "--bogus",
    "train-reward f.zarr --no-such-flag": "--no-such-flag",
    "launch launch/sim_car.launch.yaml --bogus": "--bogus",
    "demos frob": "unknown action 'frob'",
}


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess]:
    """Every command line of the module at once (each child imports the stack: ~2 s apiece)."""
    env = {**os.environ, "COLUMNS": "250"}  # help text unwrapped: flags stay whole
    lines = [f"{cmd} --help" for cmd in HELP] + list(BAD)
    procs = {line: subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *line.split()], cwd=ROOT, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for line in lines}
    done = {}
    for line, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        done[line] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.mark.parametrize("cmd", list(HELP))
def test_help_lists_every_flag(runs: dict[str, subprocess.CompletedProcess], cmd: str) -> None:
    run = runs[f"{cmd} --help"]
    assert run.returncode == 0, run.stderr
    assert f"robot-rl {cmd}" in run.stdout
    missing = [flag for flag in HELP[cmd] if flag not in run.stdout]
    assert not missing, run.stdout
    raw = [line for line in run.stdout.splitlines() if "``" in line or re.search(r":(func|class|meth|attr):", line)]
    assert not raw, raw  # the docstrings' reStructuredText is the API reference's, not the terminal's


@pytest.mark.parametrize("line", list(BAD))
def test_bad_arguments_exit_2(runs: dict[str, subprocess.CompletedProcess], line: str) -> None:
    run = runs[line]
    assert run.returncode == 2 and BAD[line] in run.stderr, run.stdout + run.stderr
    assert "Traceback" not in run.stderr


def test_flags_keep_their_old_meaning(capsys: pytest.CaptureFixture[str]) -> None:
    """The argparse-era spellings: store_true flags stay bare, -n stays the short --episodes, FILE and NAME:=VALUE
    come in any order."""
    from robot_rl.config import parse_command
    from robot_rl.datasets.cli import DiscardArgs, RecordDemosArgs
    from robot_rl.rewards.cli import RecordFramesArgs, TrainRewardArgs
    from robot_rl.ros.launch import LaunchArgs

    rec = parse_command(RecordDemosArgs, ["reach", "-n", "3", "--keep-failures", "--overwrite", "--no-progress"], "x")
    assert (rec.task, rec.episodes, rec.keep_failures, rec.overwrite, rec.progress) == ("reach", 3, True, True, False)
    default = parse_command(RecordDemosArgs, ["reach"], "x")
    assert (default.episodes, default.keep_failures, default.progress, default.out) == (20, False, True, None)
    assert parse_command(DiscardArgs, ["d.zarr", "3", "7"], "x").episodes == (3, 7)
    frames = parse_command(RecordFramesArgs, ["PickCube", "--mode", "keys", "--max-steps", "5"], "x")
    assert (frames.mode, frames.max_steps, frames.cameras) == ("keys", 5, "")
    train = parse_command(TrainRewardArgs, ["a.zarr", "b.zarr", "--epochs", "2", "--min-precision", "0.9"], "x")
    assert (train.frames, train.epochs, train.min_precision, train.lr) == (("a.zarr", "b.zarr"), 2, 0.9, None)
    launch = parse_command(LaunchArgs, ["f.yaml", "a:=1", "--print"], "x")
    assert (launch.file, launch.overrides, launch.print_only) == ("f.yaml", ("a:=1",), True)
    with pytest.raises(SystemExit) as exc:
        parse_command(RecordFramesArgs, ["PickCube", "--mode", "video"], "x")
    assert exc.value.code == 2
    from robot_rl.ros.launch import main as launch_main

    car = str(ROOT / "launch" / "sim_car.launch.yaml")
    assert launch_main(["--print", "nope:=1", car]) == 2
    assert "robot-rl launch: error: unknown launch arguments ['nope']" in capsys.readouterr().err
    assert launch_main(["namespace:=c", car, "--print"]) == 0 and "__ns:=/c" in capsys.readouterr().out


def test_train_help_shows_every_field_and_the_default_task() -> None:
    proc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for flag in ("--env.kwargs JSON", "--env.wrappers JSON", "--env.imports", "--env.obs-map.state",
                 "--env.success-key", "--agent.name", "--agent.num-critics", "--replay.mix JSON", "--seed",
                 "--runtime.max-update-lag", "--teleop.buttons JSON"):
        assert flag in out, flag
    assert "without CONFIG the bundled 'pendulum' task" in out
    assert "Pendulum-v1" in out  # the defaults shown are the default task's
    bc = subprocess.run([sys.executable, "-m", "robot_rl.cli", "train", "--agent.name", "bc", "--help"],
                        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert "--agent.lr" in bc.stdout and "--agent.num-critics" not in bc.stdout


def test_headless_commands_render_mujoco_with_egl_unless_told_otherwise() -> None:
    probe = "import os; from robot_rl.cli import main; main(['--help']); print('GL=' + os.environ['MUJOCO_GL'])"
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=ROOT)
    assert "GL=egl" in out.stdout, out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", probe], env={**env, "MUJOCO_GL": "osmesa"}, capture_output=True,
                         text=True, cwd=ROOT)
    assert "GL=osmesa" in out.stdout, out.stderr[-2000:]
