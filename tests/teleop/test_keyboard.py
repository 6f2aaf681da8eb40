"""Keyboard: the real terminal reader on the slave side of a pty (os.openpty) while the test types key bytes on
the master side: cbreak mode set and restored, escape sequences, key hold, events, closing the terminal."""

from __future__ import annotations

import io
import os
import sys
import termios
import time

import numpy as np
import pytest

from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.factory import make_device
from robot_rl.teleop.keyboard import Keyboard, parse_keys
from robot_rl.teleop.mapping import TeleopDeviceError
from tests.teleop.helpers import collect_events, wait_for

pytestmark = pytest.mark.timeout(30)


def test_parse_keys() -> None:
    assert parse_keys(b"wA \r\n\x7f\t") == ["w", "a", "space", "enter", "enter", "backspace", "tab"]
    assert parse_keys(b"\x1b[A\x1b[B\x1bOC\x1b[D\x1b[5~\x1b[6~") == ["up", "down", "right", "left", "pgup", "pgdn"]
    assert parse_keys(b"\x1b") == ["esc"]
    assert parse_keys(b"\x1b[1;5Ax") == ["x"]  # an unknown sequence (ctrl+up) is skipped whole
    assert parse_keys(b"\x03\x00") == []  # control bytes are no keys


def test_keyboard_on_a_pty(pty) -> None:
    master, slave = pty
    cfg = TeleopConfig(device="keyboard", device_path=os.ttyname(slave), key_hold_s=0.25)
    before = termios.tcgetattr(slave)
    kb = Keyboard(cfg, 4)
    try:
        lflag = termios.tcgetattr(slave)[3]
        assert not lflag & termios.ICANON and not lflag & termios.ECHO and lflag & termios.ISIG  # cbreak, Ctrl-C
        r = kb.read()
        assert r.connected and not r.active and np.array_equal(r.action, [0, 0, 0, -1])
        os.write(master, b"w")
        r = wait_for(kb, lambda r: r.active)
        np.testing.assert_array_equal(r.action, [1, 0, 0, -1])
        t0 = time.monotonic()
        r = wait_for(kb, lambda r: not r.active)  # no release from a terminal: the press expires
        assert 0.1 < time.monotonic() - t0 < 1.0 and np.array_equal(r.action, [0, 0, 0, -1])
        os.write(master, b"\x1b[D")  # left arrow: +y
        wait_for(kb, lambda r: r.active)
        for _ in range(6):  # a held key: autorepeat keeps it held
            time.sleep(0.05)
            os.write(master, b"\x1b[D")
            assert kb.read().active
        np.testing.assert_array_equal(kb.read().action, [0, 1, 0, -1])
        os.write(master, b"f")  # down (z-) together with the still-held left arrow
        r = wait_for(kb, lambda r: r.action[2] == -1)
        np.testing.assert_array_equal(r.action, [0, 1, -1, -1])
        wait_for(kb, lambda r: not r.active)
        os.write(master, b" ")  # gripper toggles closed
        r = wait_for(kb, lambda r: r.action[3] == 1)
        assert r.active
        events: set[str] = set()
        for key, event in [(b"\r", "success"), (b"x", "failure"), (b"\x7f", "reset"), (b"p", "pause")]:
            os.write(master, key)
            wait_for(kb, lambda r, event=event: event in r.events)
        time.sleep(0.3)  # a key pressed again within key_hold_s is still the same press
        os.write(master, b"\r\r\r")  # a held key's autorepeat: one success
        assert collect_events(kb, "success") == ["success"]
        os.write(master, b"W")  # shift / caps lock: same binding
        wait_for(kb, lambda r: r.action[0] == 1, events=events)
        kb.reset()
        assert kb.read().action[3] == -1
    finally:
        kb.close()
    assert termios.tcgetattr(slave) == before  # terminal restored


def test_keyboard_disconnect_and_car_mapping(pty) -> None:
    master, slave = pty
    kb = Keyboard(TeleopConfig(device="keyboard", scale=(0.5,)), 2, fd=slave)  # car: speed, yaw rate
    try:
        os.write(master, b"wa")
        r = wait_for(kb, lambda r: r.active)
        np.testing.assert_array_equal(r.action, [0.5, 0.5])
        os.write(master, b"w")
        os.close(master)  # the terminal goes away while a key is held
        r = wait_for(kb, lambda r: not r.connected)
        assert not r.active and np.array_equal(r.action, [0, 0])
    finally:
        kb.close()


def test_keyboard_needs_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("not a tty"))
    with pytest.raises(TeleopDeviceError, match="not a terminal"):
        make_device(TeleopConfig(device="keyboard"), 4)
    with pytest.raises(TeleopDeviceError, match="cannot open"):
        Keyboard(TeleopConfig(device="keyboard", device_path="/nonexistent/tty"), 4)
    with pytest.raises(ValueError, match="unknown function"):
        Keyboard(TeleopConfig(device="keyboard", buttons={"q": "fly"}), 4, fd=0)
