import logging
import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _robot_rl_logs_reach_caplog(request: pytest.FixtureRequest):
    """robot_rl's own logger stops propagating once a CLI entry point configured it (setup_logging), so whether a
    test's caplog saw its records depended on which test ran first in the process. A test that asks for caplog gets
    robot_rl's records straight into caplog's handler, exactly once, whatever ran before."""
    if "caplog" not in request.fixturenames:
        yield
        return
    caplog, logger = request.getfixturevalue("caplog"), logging.getLogger("robot_rl")
    propagate = logger.propagate
    logger.propagate = False
    logger.addHandler(caplog.handler)
    yield
    logger.removeHandler(caplog.handler)
    logger.propagate = propagate


@pytest.fixture
def pty():
    """A pseudo-terminal (master, slave) for keyboard tests: what a user types arrives on the slave side."""
    master, slave = os.openpty()
    yield master, slave
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


@pytest.fixture
def domain(monkeypatch: pytest.MonkeyPatch) -> int:
    """A ROS domain of this test's own, set in the environment (node processes inherit it), localhost-only."""
    from tests.ros.graph import new_domain, ros_env

    d = new_domain()
    for k, v in ros_env(d).items():
        if os.environ.get(k) != v:
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)
    return d


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """ROBOT_RL_TEST_PHASE=parallel keeps the tests not marked serial, =serial only those (scripts/test.sh runs
    the two phases); unset, every test runs. A selection by the environment composes with any -m or -k."""
    phase = os.environ.get("ROBOT_RL_TEST_PHASE", "")
    if phase not in ("parallel", "serial"):
        return
    keep, drop = [], []
    for item in items:
        (keep if (item.get_closest_marker("serial") is not None) == (phase == "serial") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-hogs", type=int, default=0,
                     help="start N busy-loop processes beside the whole session (robustness of timing-sensitive "
                          "tests: scripts/stress_runtime.sh runs tests/runtime this way)")


@pytest.fixture(scope="session", autouse=True)
def cpu_hogs(request: pytest.FixtureRequest):
    """``--cpu-hogs N``: N processes spinning on the CPU for the whole session (none by default)."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(request.config.getoption("--cpu-hogs"))]
    yield len(procs)
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def tiny_vla(tmp_path_factory: pytest.TempPathFactory):
    """A tiny VLA trained for a few steps on 2 scripted PickColor demos (32x32 cameras, chunks of 5): a real base
    policy for runtime tests, built once per session. Returns its folder."""
    from robot_rl.vla.train import TrainBCConfig, train_bc
    from tests.policies.toy import TINY_VLA

    root = tmp_path_factory.mktemp("base")
    train_bc(TrainBCConfig(datasets=("scripted:PickColor:2",), out=str(root / "vla"), demo_dir=str(root / "demos"),
                           steps=10, batch_size=8, warmup_steps=2, eval_episodes=0, progress=False, model=TINY_VLA))
    return root / "vla"
