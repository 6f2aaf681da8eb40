"""How a ``robot-rl`` subcommand fails: ``robot-rl <cmd>: error: <message>`` on stderr and exit code 2, the form
the parser (tyro/argparse) uses for a bad flag, so every command fails alike and scripts can rely on it."""

from __future__ import annotations

import sys
from typing import Any

import tyro

from robot_rl.utils.disk import DISK_FULL, describe, disk_full_error
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


def command_error(prog: str, message: object) -> int:
    """Reports ``message`` (an exception or text) for command ``prog`` (``robot-rl demos show``); returns 2, or 3
    (``DISK_FULL``) when the exception is a full disk.

    The line goes straight to the current ``sys.stderr`` rather than through a log handler: it is the command's
    answer, shown at any ``--log-level``. An exception's traceback goes to the debug log (``--log-level debug``).
    """
    if isinstance(message, BaseException):
        log.debug("%s failed", prog, exc_info=message)
        if (full := disk_full_error(message)) is not None:
            print(f"{prog}: stopped, the disk is full ({describe(full)})", file=sys.stderr, flush=True)
            return DISK_FULL
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 2


def derived(metavar: str, default: str) -> Any:
    """``tyro.conf.arg`` of an optional flag whose ``None`` default means "worked out from the rest": ``--help``
    shows ``--out PATH ... (default: <default>)`` rather than ``--out {None}|STR ... (default: None)``."""
    return tyro.conf.arg(metavar=metavar, help_behavior_hint=f"(default: {default})")
