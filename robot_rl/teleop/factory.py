"""``make_device(cfg, action_dim)``: the teleop device a :class:`TeleopConfig` names.

Hardware libraries (hidapi, pygame, rclpy) are imported only for the device asked for. A device that cannot be
used (not plugged in, library missing, stdin not a terminal) raises :class:`TeleopDeviceError` with the reason.
"""

from __future__ import annotations

import sys
from typing import Any

from robot_rl.teleop.base import TeleopDevice, TeleopReading
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.gamepad import Gamepad
from robot_rl.teleop.keyboard import EVENT_KEYS, Keyboard
from robot_rl.teleop.mapping import TeleopDeviceError
from robot_rl.teleop.ros_teleop import RosTeleop
from robot_rl.teleop.scripted import ScriptedHuman
from robot_rl.teleop.spacemouse import SpaceMouse

__all__ = ["TeleopDeviceError", "WithKeyboardEvents", "make_device", "reads_terminal"]


class WithKeyboardEvents:
    """A device plus the terminal's event keys (Enter: success, x: failure, Backspace: reset, p: pause): a
    SpaceMouse has two buttons and a ROS Twist none, yet the operator must label and discard episodes.
    Motion and ``active`` come from the device only; its connection state is the device's."""

    def __init__(self, device: Any, keyboard: Any) -> None:
        self.device, self.keyboard = device, keyboard
        self.action_dim = device.action_dim
        self.name = getattr(device, "name", type(device).__name__)

    def read(self) -> TeleopReading:
        reading = self.device.read()
        events = reading.events | self.keyboard.read().events
        return TeleopReading(reading.action, reading.active, events, reading.connected)

    def reset(self) -> None:
        for dev in (self.device, self.keyboard):
            if hasattr(dev, "reset"):
                dev.reset()

    def close(self) -> None:
        self.device.close()
        self.keyboard.close()


def make_device(cfg: TeleopConfig, action_dim: int, keyboard_events: bool | None = None) -> TeleopDevice:
    """The device ``cfg.device`` for ``action_dim``-D actions.

    ``keyboard_events`` (default: when stdin is a terminal) also reads the terminal's event keys beside a
    gamepad, SpaceMouse or ROS input. ``scripted`` returns the scripted human (attach it to the env).
    """
    cfg.validate()
    if cfg.device == "none":
        raise ValueError("teleop.device is 'none': no device to make")
    if cfg.device == "scripted":
        return ScriptedHuman(cfg.scripted, action_dim)
    if cfg.device == "keyboard":
        return Keyboard(cfg, action_dim)
    if cfg.device == "gamepad":
        device: Any = Gamepad(cfg, action_dim)
    elif cfg.device == "spacemouse":
        device = SpaceMouse(cfg, action_dim)
    else:
        device = RosTeleop(cfg, action_dim)
    if keyboard_events is None:
        keyboard_events = bool(sys.stdin) and sys.stdin.isatty()
    if not keyboard_events:
        return device

    try:
        keys = Keyboard(TeleopConfig(device="keyboard", buttons=dict(EVENT_KEYS), axes=("0",) * action_dim), action_dim)
    except BaseException:
        device.close()
        raise
    return WithKeyboardEvents(device, keys)


def reads_terminal(device: Any) -> bool:
    """Whether ``device`` reads this process's terminal (the keyboard, or the event keys beside another device)."""
    keyboard = device.keyboard if isinstance(device, WithKeyboardEvents) else device
    return isinstance(keyboard, Keyboard) and keyboard.reads_stdin
