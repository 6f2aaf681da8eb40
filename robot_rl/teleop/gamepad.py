"""Gamepad / joystick teleop through pygame (SDL2's joystick API): Xbox, PlayStation and generic pads.

Inputs: axes ``a0``.. in [-1, 1] (SDL: sticks down and right are positive), hat axes ``h0x`` / ``h0y`` (up is
positive), buttons ``b0``... The defaults assume the common Xbox-style order on Linux (a0/a1 left stick,
a2 left trigger, a3/a4 right stick, a5 right trigger; b0 A, b1 B, b2 X, b3 Y, b4/b5 bumpers, b6 back, b7 start);
other pads: set ``teleop.axes`` / ``teleop.buttons``. Triggers rest at -1, so never map one as a plain axis
with ``takeover: motion`` (the human would always look active).

pygame is initialised on the reader thread with the video subsystem only (events need it; the ``dummy`` video
driver when there is no display) and ``SDL_JOYSTICK_ALLOW_BACKGROUND_EVENTS`` so no window is needed. Removing
the pad makes the device ``connected=False`` at once; with ``reconnect`` it is used again when plugged back.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.mapping import InputMap, TeleopDeviceError, ThreadedDevice, default_axes

SIX_DOF = ("-a1", "-a0", "-a4", "h0x", "h0y", "-a3")  # left stick: x/y, right stick: z and yaw, hat: roll/pitch
CAR = ("-a1", "-a3")  # left stick up: forward; right stick left: turn left
DEFAULT_BUTTONS = {"b0": "gripper", "b7": "success", "b6": "failure", "b3": "reset", "b2": "pause",
                   "b5": "takeover", "b1": "ready", "b8": "stop"}
POLL_S = 0.01


def init_pygame() -> Any:
    """pygame with the joystick and (event-only) video subsystems, without audio; returns the module."""
    os.environ.setdefault("SDL_JOYSTICK_ALLOW_BACKGROUND_EVENTS", "1")
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame  # optional: teleop
    except ImportError as exc:
        raise TeleopDeviceError(f"gamepad: pygame is not installed (pip install 'robot-rl[teleop]'): {exc}") from exc
    pygame.display.init()
    pygame.joystick.init()
    return pygame


class Gamepad(ThreadedDevice):
    """A pygame joystick; ``cfg.device_path`` picks its index (default 0)."""

    name = "gamepad"

    def __init__(self, cfg: TeleopConfig, action_dim: int, ready_timeout: float = 5.0) -> None:
        super().__init__(InputMap(cfg, action_dim, default_axes(action_dim, SIX_DOF, CAR), DEFAULT_BUTTONS))
        self.index = int(cfg.device_path or 0)
        self.reconnect = cfg.reconnect
        self.joystick_name = ""
        self._ready = threading.Event()
        self.start()
        if not self._ready.wait(ready_timeout) or not self.connected:
            self.close()
            raise TeleopDeviceError(f"gamepad: {self.error or 'pygame did not start'}")

    def _run(self) -> None:
        try:
            pygame = init_pygame()
            joy = self._open(pygame)
            if joy is None:
                self.error = f"no joystick {self.index} (pygame sees {pygame.joystick.get_count()})"
                return
        finally:
            self._ready.set()
        while not self._stop.is_set():
            tapped: set[str] = set()
            for event in pygame.event.get():
                ours = joy is not None and getattr(event, "instance_id", None) == joy.get_instance_id()
                if event.type == pygame.JOYDEVICEREMOVED and ours:
                    joy, self.connected = None, False
                    self.map.release()  # no stale deflection when it is back
                    if not self.reconnect:
                        return
                elif event.type == pygame.JOYDEVICEADDED and joy is None:
                    joy = self._open(pygame)
                elif event.type == pygame.JOYBUTTONDOWN and ours:
                    tapped.add(f"b{event.button}")  # a tap shorter than a poll still counts
            if joy is not None:
                axes = {f"a{i}": joy.get_axis(i) for i in range(joy.get_numaxes())}
                for h in range(joy.get_numhats()):
                    axes[f"h{h}x"], axes[f"h{h}y"] = (float(v) for v in joy.get_hat(h))
                held = {f"b{i}" for i in range(joy.get_numbuttons()) if joy.get_button(i)}
                if tapped - held:
                    self.map.update(axes, held | tapped)
                self.map.update(axes, held)
            self._stop.wait(POLL_S)
        if joy is not None:
            joy.quit()

    def _open(self, pygame: Any) -> Any:
        if pygame.joystick.get_count() <= self.index:
            return None
        joy = pygame.joystick.Joystick(self.index)
        joy.init()
        self.joystick_name = joy.get_name()
        self.connected = True
        return joy
