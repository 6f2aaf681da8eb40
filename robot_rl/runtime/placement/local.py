"""Where the supervisor's processes run: a :class:`Launcher` starts the learner and the actors and hands back
:class:`Process` handles. :class:`LocalLauncher` makes OS processes on this machine; the Ray launcher
(``robot_rl.runtime.placement.ray_launcher``) places actors on other machines. The supervisor's restart rules are
the same for both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from robot_rl.utils.process import PARENT_ENV

CONFIG_ERROR = 2
"""Exit code of a learner or actor that refused its config: the supervisor stops the run, it does not restart."""


class Process(Protocol):
    """What the supervisor needs of a started learner or actor (``subprocess.Popen`` has it)."""

    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class Launcher(Protocol):
    """Starts the processes of one run."""

    def setup(self) -> None:
        """Before anything starts (e.g. join a cluster, start a gateway)."""

    def start_learner(self, resume: bool) -> Process: ...

    def start_actor(self, index: int, incarnation: int) -> Process: ...

    def check_actor_death(self, index: int, code: int) -> None:
        """Raises when an actor's death means the run cannot go on (e.g. the Ray gateway died)."""

    def teardown(self) -> None:
        """After every process has ended."""


class LocalLauncher:
    """Learner and actors as ``robot-rl learner`` / ``robot-rl actor`` OS processes on this machine."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def _spawn(self, *args: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "robot_rl.cli", *args, "--run-dir", str(self.run_dir)]
        # no preexec_fn (it can deadlock a child forked while threads run): the child asks for SIGTERM on the
        # supervisor's death itself, at start-up (robot_rl.utils.process.die_with_parent)
        return subprocess.Popen(cmd, env={**os.environ, PARENT_ENV: str(os.getpid())})

    def setup(self) -> None:
        pass

    def start_learner(self, resume: bool) -> Process:
        return self._spawn("learner", *(["--resume"] if resume else []))

    def start_actor(self, index: int, incarnation: int) -> Process:
        return self._spawn("actor", "--index", str(index), "--incarnation", str(incarnation))

    def check_actor_death(self, index: int, code: int) -> None:
        pass

    def teardown(self) -> None:
        pass
