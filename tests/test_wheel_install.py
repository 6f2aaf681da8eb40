"""robot_rl as a user installs it: the wheel built from this checkout, installed into a clean virtual environment
outside the repository, trains Pendulum from a bundled config with actor and learner as processes, and registers
every launch file with ``robot-rl ros-index``, and starts (``--print``) every launch file the guides name, by the
path they show and by name. The wheel is installed without dependencies; the environment reaches
this checkout's dependencies through a ``.pth`` line (not its editable robot_rl: ``.pth`` files of an added
directory are not run), so what is tested is the wheel's own content: packages, package data, entry points."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(400)
def test_the_wheel_trains_and_registers_every_launch_file(tmp_path):
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = wheels.glob("robot_rl-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True, capture_output=True)
    where = subprocess.run([str(py), "-c", "import robot_rl, robot_rl_sim; print(robot_rl.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert where.startswith(str(venv)), where  # the wheel's robot_rl, not this checkout's

    cli = venv / "bin" / "robot-rl"
    run = subprocess.run([str(cli), "train", "pendulum", "--name", "w", "--runs-dir", str(tmp_path / "runs"),
                          "--total-env-steps", "400", "--random-steps", "200", "--learning-starts", "200",
                          "--eval-every", "0", "--eval-episodes", "1", "--no-progress"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads((tmp_path / "runs" / "w" / "status.json").read_text())["env_steps"] >= 400

    index = subprocess.run([str(cli), "ros-index", str(tmp_path / "prefix")], capture_output=True, text=True,
                           cwd=tmp_path)
    assert index.returncode == 0, index.stderr[-2000:]
    registered = sorted(p.name for p in (tmp_path / "prefix" / "share" / "robot_rl" / "launch").glob("*.yaml"))
    assert registered == sorted(p.name for p in (ROOT / "launch").glob("*.launch.yaml"))

    listed = subprocess.run([str(cli), "launch", "--list"], capture_output=True, text=True, cwd=tmp_path)
    names = sorted(p.name.removesuffix(".launch.yaml") for p in (ROOT / "launch").glob("*.launch.yaml"))
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()] == names, listed
    shown = set(re.findall(r"robot-rl launch (launch/\S+\.launch\.yaml)", "\n".join(
        p.read_text() for p in [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"])))
    assert len(shown) >= 5, shown
    for word in sorted(shown) + names:  # no launch/ folder here: each resolves to the installed package's file
        needs = ["run_dir:=runs/x"] if "actor" in word else []  # the one launch file with a required argument
        printed = subprocess.run([str(cli), "launch", word, *needs, "--print"], capture_output=True, text=True,
                                 cwd=tmp_path)
        assert printed.returncode == 0 and str(venv) in printed.stdout, (word, printed.stderr[-2000:])


def test_the_wheel_lists_every_source_package():
    """pyproject names its packages one by one (sim/ and controllers/ install under other names): a package folder
    it leaves out is missing from the wheel, which only the slow test above would otherwise catch."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: Path(folder) for name, folder in setup["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    assert found - set(setup["packages"]) == set(), "packages missing from pyproject's [tool.setuptools] packages"
