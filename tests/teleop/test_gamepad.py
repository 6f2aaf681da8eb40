"""Gamepad: the real pygame reader fed by SDL's virtual joystick (SDL_JoystickAttachVirtual in the very libSDL2
that pygame loaded): sticks, hat, buttons, unplug and replug."""

from __future__ import annotations

import ctypes
import glob
import os
import time

import numpy as np
import pytest

pygame = pytest.importorskip("pygame")

from robot_rl.teleop.config import TeleopConfig  # noqa: E402
from robot_rl.teleop.gamepad import Gamepad, init_pygame  # noqa: E402
from robot_rl.teleop.mapping import TeleopDeviceError  # noqa: E402
from tests.teleop.helpers import collect_events, wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(30)


class VirtualPad:
    """A virtual joystick (6 axes, 12 buttons, 1 hat) attached to SDL: what the USB pad would be."""

    def __init__(self) -> None:
        libs = os.path.join(os.path.dirname(pygame.__file__), os.pardir, "pygame.libs", "libSDL2-2*.so*")
        paths = glob.glob(libs)
        if not paths:
            pytest.skip("pygame's bundled libSDL2 not found (pygame from a system package?)")
        self.sdl = ctypes.CDLL(paths[0])  # the same, already loaded library: same SDL state as pygame
        self.sdl.SDL_JoystickOpen.restype = ctypes.c_void_p
        self.sdl.SDL_GetError.restype = ctypes.c_char_p
        self.handle = None

    def attach(self) -> None:
        index = self.sdl.SDL_JoystickAttachVirtual(0, 6, 12, 1)  # SDL_JOYSTICK_TYPE_UNKNOWN
        assert index >= 0, self.sdl.SDL_GetError()
        self.index = index
        self.handle = ctypes.c_void_p(self.sdl.SDL_JoystickOpen(index))
        for axis in range(6):
            self.axis(axis, 0.0)

    def axis(self, axis: int, value: float) -> None:
        raw = int(np.clip(round(value * 32767), -32768, 32767))
        assert self.sdl.SDL_JoystickSetVirtualAxis(self.handle, axis, ctypes.c_int16(raw)) == 0

    def button(self, button: int, down: bool) -> None:
        assert self.sdl.SDL_JoystickSetVirtualButton(self.handle, button, ctypes.c_uint8(down)) == 0

    def hat(self, value: int) -> None:  # SDL_HAT_UP = 1, RIGHT = 2, DOWN = 4, LEFT = 8
        assert self.sdl.SDL_JoystickSetVirtualHat(self.handle, 0, ctypes.c_uint8(value)) == 0

    def detach(self) -> None:
        if self.handle is not None:
            self.sdl.SDL_JoystickClose(self.handle)
            self.sdl.SDL_JoystickDetachVirtual(self.index)
            self.handle = None


@pytest.fixture
def pad():
    init_pygame()  # SDL's joystick subsystem must be up before a virtual joystick can be attached
    vp = VirtualPad()
    vp.attach()
    yield vp
    vp.detach()


def test_gamepad_sticks_buttons_unplug_replug(pad: VirtualPad) -> None:
    dev = Gamepad(TeleopConfig(device="gamepad"), 4)
    try:
        r = dev.read()
        assert r.connected and not r.active and np.array_equal(r.action, [0, 0, 0, -1])
        assert dev.joystick_name
        pad.axis(1, -1.0)  # left stick up: forward
        pad.axis(0, -0.5)  # and half left
        r = wait_for(dev, lambda r: r.active and r.action[1] > 0)
        np.testing.assert_allclose(r.action, [1, (0.5 - 0.1) / 0.9, 0, -1], atol=2e-4)
        pad.axis(4, -0.05)  # right stick drift inside the deadzone: z stays 0
        pad.axis(1, 0.0)
        pad.axis(0, 0.0)
        r = wait_for(dev, lambda r: not r.active)
        np.testing.assert_array_equal(r.action, [0, 0, 0, -1])
        pad.button(0, True)  # A: gripper closes (toggle)
        r = wait_for(dev, lambda r: r.action[3] == 1)
        assert r.active
        pad.button(0, False)
        pad.button(7, True)  # start: success, once however long it is held
        time.sleep(0.03)
        assert collect_events(dev, "success") == ["success"]
        pad.button(7, False)
        pad.button(3, True)  # Y: reset (a virtual pad only reports state at SDL's update, so hold it briefly)
        time.sleep(0.03)
        pad.button(3, False)
        assert collect_events(dev, "reset") == ["reset"]
        pad.axis(1, 1.0)
        wait_for(dev, lambda r: r.action[0] < 0)
        pad.detach()  # pulled out while the stick is deflected
        r = wait_for(dev, lambda r: not r.connected)
        assert not r.active and np.array_equal(r.action, np.zeros(4))
        pad.attach()  # plugged back: used again, nothing deflected
        r = wait_for(dev, lambda r: r.connected)
        time.sleep(0.05)
        r = dev.read()
        assert r.connected and not r.active
        pad.axis(4, -1.0)  # right stick up: z+
        r = wait_for(dev, lambda r: r.active)
        np.testing.assert_allclose(r.action[:3], [0, 0, 1], atol=2e-4)
    finally:
        dev.close()


def test_gamepad_hat_and_deadman_seven_dof(pad: VirtualPad) -> None:
    cfg = TeleopConfig(device="gamepad", takeover="deadman", deadzone=0.0)
    dev = Gamepad(cfg, 7)
    try:
        pad.hat(1 | 2)  # up-right on the hat: roll +, pitch + (hat y up is positive)
        r = wait_for(dev, lambda r: r.action[3] > 0)
        np.testing.assert_array_equal(r.action, [0, 0, 0, 1, 1, 0, -1])
        assert not r.active  # deadman: moving alone does not take over
        pad.button(5, True)  # right bumper held
        wait_for(dev, lambda r: r.active)
        pad.button(5, False)
        wait_for(dev, lambda r: not r.active)
    finally:
        dev.close()


def test_gamepad_missing() -> None:
    init_pygame()
    with pytest.raises(TeleopDeviceError, match="no joystick 3"):
        Gamepad(TeleopConfig(device="gamepad", device_path="3"), 4)
