"""Keyboard teleop in a terminal: no display, no X server, works over ssh.

The reader thread puts the terminal in cbreak mode (no line buffering, no echo; Ctrl-C still interrupts),
reads key bytes, decodes escape sequences (arrows, page up/down) and restores the terminal on close. Terminals
send presses and autorepeat but no releases, so a key counts as held for ``key_hold_s`` after its last byte.
Keys are buttons (``w``, ``enter``, ``up``, ``space``, ...); motion comes from keys mapped to ``+<axis>`` /
``-<axis>`` (virtual axes ``x y z roll pitch yaw``). End of input (the terminal closed) means disconnected.
"""

from __future__ import annotations

import atexit
import os
import select
import sys
import termios
import time
import tty

from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.mapping import InputMap, TeleopDeviceError, ThreadedDevice, default_axes

SIX_DOF = ("x", "y", "z", "roll", "pitch", "yaw")
DEFAULT_BUTTONS = {
    "w": "+x", "s": "-x", "a": "+y", "d": "-y", "r": "+z", "f": "-z",  # x forward, y left, z up
    "up": "+x", "down": "-x", "left": "+y", "right": "-y",
    "u": "+roll", "o": "-roll", "i": "+pitch", "k": "-pitch", "j": "+yaw", "l": "-yaw",
    "space": "gripper", "enter": "success", "x": "failure", "backspace": "reset", "p": "pause", "t": "takeover",
    "g": "ready", "q": "stop",
}
EVENT_KEYS = {"enter": "success", "x": "failure", "backspace": "reset", "p": "pause", "g": "ready", "q": "stop"}
SEQUENCES = {  # escape sequences of xterm-like terminals (normal and application cursor mode)
    b"\x1b[A": "up", b"\x1b[B": "down", b"\x1b[C": "right", b"\x1b[D": "left",
    b"\x1bOA": "up", b"\x1bOB": "down", b"\x1bOC": "right", b"\x1bOD": "left",
    b"\x1b[5~": "pgup", b"\x1b[6~": "pgdn", b"\x1b[H": "home", b"\x1b[F": "end", b"\x1b[3~": "delete",
}
SINGLE = {b" ": "space", b"\r": "enter", b"\n": "enter", b"\x7f": "backspace", b"\x08": "backspace", b"\t": "tab"}


def parse_keys(data: bytes) -> list[str]:
    """Key names in a chunk of terminal input: ``b"w\\x1b[A\\r"`` -> ``["w", "up", "enter"]``."""
    keys, i = [], 0
    while i < len(data):
        if data[i:i + 1] == b"\x1b":
            seq = next((s for s in SEQUENCES if data.startswith(s, i)), None)
            if seq is not None:
                keys.append(SEQUENCES[seq])
                i += len(seq)
                continue
            if data[i + 1:i + 2] in (b"[", b"O"):  # an unknown sequence: skip it whole, never read it as keys
                j = i + 2
                while j < len(data) and not 0x40 <= data[j] <= 0x7E:
                    j += 1
                i = j + 1
                continue
            keys.append("esc")
            i += 1
            continue
        ch = data[i:i + 1]
        if ch in SINGLE:
            keys.append(SINGLE[ch])
        elif 0x20 < ch[0] < 0x7F:
            keys.append(ch.decode().lower())  # caps lock or shift must not change the binding
        i += 1
    return keys


class Keyboard(ThreadedDevice):
    """Terminal keyboard; reads ``fd`` (default: ``cfg.device_path`` if set, else stdin, which must be a tty)."""

    name = "keyboard"

    def __init__(self, cfg: TeleopConfig, action_dim: int, fd: int | None = None) -> None:
        buttons = cfg.buttons or DEFAULT_BUTTONS
        super().__init__(InputMap(cfg, action_dim, default_axes(action_dim, SIX_DOF, ("x", "y")), buttons, ()))
        self.hold_s = cfg.key_hold_s
        self._own_fd = False
        if fd is None and cfg.device_path:
            try:
                fd = os.open(cfg.device_path, os.O_RDONLY | os.O_NOCTTY)
            except OSError as exc:
                raise TeleopDeviceError(f"keyboard: cannot open {cfg.device_path}: {exc}") from exc
            self._own_fd = True
        elif fd is None:
            if not sys.stdin or not sys.stdin.isatty():
                raise TeleopDeviceError("keyboard: stdin is not a terminal (run in a terminal or set "
                                        "teleop.device_path to one)")
            fd = sys.stdin.fileno()
        self.fd = fd
        self.reads_stdin = not self._own_fd
        """Whether this keyboard is this process's terminal (stdin), not a terminal named by ``device_path``."""
        self._saved = None
        if os.isatty(fd):
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd, termios.TCSANOW)
            atexit.register(self._restore)  # a crash must not leave the user's terminal without echo
        self._pressed_at: dict[str, float] = {}
        self.keys_read = 0
        self.connected = True
        self.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.02)
            if ready:
                try:
                    data = os.read(self.fd, 256)
                except OSError as exc:  # EIO: the terminal (or the pty's other side) is gone
                    self.error = f"terminal read failed: {exc}"
                    data = b""
                if not data:
                    self.connected = False
                    self.map.release()
                    return
                now = time.monotonic()
                for key in parse_keys(data):
                    self._pressed_at[key] = now
                    self.keys_read += 1
            now = time.monotonic()
            held = {k for k, t in self._pressed_at.items() if now - t < self.hold_s}
            self.map.update(None, held)

    def _restore(self) -> None:
        if self._saved is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            except (OSError, termios.error):
                pass
            self._saved = None

    def close(self) -> None:
        super().close()
        self._restore()
        atexit.unregister(self._restore)
        if self._own_fd:
            os.close(self.fd)
            self._own_fd = False
