"""Logging for every robot_rl command: one call configures it, child processes inherit the level.

Messages go to stderr through the ``logging`` module: with rich's handler on a terminal, as plain
``LEVEL [logger] message`` lines otherwise (logs and CI output stay greppable, nothing is wrapped).
The level comes from ``--log-level`` (any command) or ``ROBOT_RL_LOG_LEVEL``; processes a command starts inherit
the variable.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

ENV_VAR = "ROBOT_RL_LOG_LEVEL"
LEVELS = ("debug", "info", "warning", "error")


@cache
def console() -> Console:
    """The terminal console of robot_rl's progress bars and log lines: stderr, so stdout carries only results."""
    from rich.console import Console  # lazy: a LeRobot-only policy server runs without rich

    return Console(stderr=True)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (redirections and captures made later are honoured)."""

    @property
    def stream(self):  # noqa: ANN201 - logging's attribute
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001 - StreamHandler.__init__ assigns it
        pass


def get_logger(name: str) -> logging.Logger:
    """``robot_rl.<name>`` (the part after ``robot_rl.`` of a module's ``__name__`` is enough)."""
    return logging.getLogger(name if name.startswith("robot_rl") else f"robot_rl.{name}")


def setup_logging(level: str | None = None) -> None:
    """Configures the ``robot_rl`` loggers once per process (later calls only change the level)."""
    level = (level or os.environ.get(ENV_VAR) or "info").lower()
    if level not in LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LEVELS)}, got {level!r}")
    os.environ[ENV_VAR] = level  # children started from here log at the same level
    root = logging.getLogger("robot_rl")
    root.setLevel(level.upper())
    if any(getattr(h, "_robot_rl", False) for h in root.handlers):
        return
    if sys.stderr.isatty() and _has_rich():
        from rich.logging import RichHandler  # lazy: a LeRobot-only policy server runs without rich

        handler: logging.Handler = RichHandler(console=console(), show_path=False, rich_tracebacks=False,
                                               log_time_format="%H:%M:%S")
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    else:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s [%(name)s] %(message)s"))
    handler._robot_rl = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.propagate = False


def _has_rich() -> bool:
    """rich is one of robot_rl's dependencies; a LeRobot-only policy server may run without it."""
    return importlib.util.find_spec("rich") is not None


def pop_log_level(argv: list[str]) -> tuple[list[str], str | None]:
    """Takes ``--log-level X`` / ``--log-level=X`` out of a command line (it may stand anywhere)."""
    out, level, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--log-level":
            if i + 1 >= len(argv):
                raise ValueError("--log-level needs a value: " + ", ".join(LEVELS))
            level, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--log-level="):
            level = arg.split("=", 1)[1]
        else:
            out.append(arg)
        i += 1
    return out, level
