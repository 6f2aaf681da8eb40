import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))


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
