"""make_device and the devices behind the intervention wrapper: a keyboard on a pty takes over a real PickCube
through wrap_with_teleop; a SpaceMouse (fake HID reports) plus the terminal's event keys; config validation."""

from __future__ import annotations

import os
import struct
import time

import numpy as np
import pytest

from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.factory import WithKeyboardEvents, make_device
from robot_rl.teleop.intervention import InterventionWrapper, wrap_with_teleop
from robot_rl.teleop.keyboard import EVENT_KEYS, Keyboard
from robot_rl.teleop.scripted import ScriptedHuman
from robot_rl.teleop.spacemouse import SpaceMouse
from tests.teleop.helpers import wait_for
from tests.teleop.test_spacemouse import FakeHid

pytestmark = pytest.mark.timeout(60)


def test_make_device_kinds_and_config_errors() -> None:
    with pytest.raises(ValueError, match="'none'"):
        make_device(TeleopConfig(), 4)
    human = make_device(TeleopConfig(device="scripted"), 4)
    assert isinstance(human, ScriptedHuman) and human.action_dim == 4
    for bad, match in [(dict(deadzone=1.0), "deadzone"), (dict(takeover="grab"), "takeover"),
                       (dict(ros_msg="pose"), "ros_msg"), (dict(buttons={"b0": "jump"}), "unknown function"),
                       (dict(scale=()), "scale"), (dict(device="joystick"), "teleop.device")]:
        with pytest.raises(ValueError, match=match):
            TeleopConfig(**{"device": "keyboard", **bad}).validate()


def test_keyboard_takes_over_pickcube_through_the_wrapper(pty) -> None:
    master, slave = pty
    cfg = TeleopConfig(device="keyboard", device_path=os.ttyname(slave), key_hold_s=0.2)
    env = wrap_with_teleop(make_env(EnvConfig(id="robot_rl/PickCube-v0")), cfg)
    assert isinstance(env, InterventionWrapper) and isinstance(env.device, Keyboard)
    policy = np.array([0.0, -1.0, 0.0, -1.0], np.float32)
    try:
        env.reset(seed=0)
        info = env.step(policy)[4]  # a person's episode waits for the ready key, the robot held
        assert info["paused"] and info["operator"].control == "waiting" and env.unwrapped.steps == 0
        os.write(master, b"g")
        time.sleep(0.1)
        assert env.step(policy)[4]["operator"].control == "waiting" and not env.waiting  # it runs from the next
        assert not env.step(policy)[4]["intervened"]
        os.write(master, b"r")  # up: the human takes over
        wait_for(env.device, lambda r: r.active)
        info = env.step(policy)[4]
        assert info["intervened"] and np.array_equal(info["executed_action"], [0, 0, 1, -1])
        time.sleep(0.3)  # key released (expired): the policy drives again
        assert not env.step(policy)[4]["intervened"]
        os.write(master, b"\r")
        time.sleep(0.1)  # the event waits in the device until the wrapper's next read
        _, reward, terminated, _, info = env.step(policy)
        assert terminated and reward == 1.0 and info["is_success"]
        env.reset(seed=1)
        os.write(master, b"g")
        time.sleep(0.1)
        env.step(policy)
        os.close(master)  # the terminal is gone: the robot is held, never left to the policy
        deadline = time.monotonic() + 3
        while env.device.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        info = env.step(policy)[4]
        assert info["paused"] and not info["teleop_connected"]
        np.testing.assert_array_equal(info["executed_action"], env.unwrapped.hold_action())
    finally:
        env.close()


def test_spacemouse_with_keyboard_event_keys(pty) -> None:
    master, slave = pty
    hid = FakeHid()
    mouse = SpaceMouse(TeleopConfig(device="spacemouse"), 4, open_device=lambda: hid)
    keys = Keyboard(TeleopConfig(device="keyboard", buttons=dict(EVENT_KEYS), axes=("0",) * 4), 4, fd=slave)
    dev = WithKeyboardEvents(mouse, keys)
    try:
        os.write(master, b"w")  # a motion key is not bound here: the keyboard only labels
        hid.send([1, *struct.pack("<hhh", 0, 0, -350)])
        r = wait_for(dev, lambda r: r.active)
        np.testing.assert_allclose(r.action, [0, 0, 1, -1])
        events: set[str] = set()
        os.write(master, b"\x7f")
        wait_for(dev, lambda r: "reset" in events, events=events)
        os.write(master, b"p")
        wait_for(dev, lambda r: "pause" in events, events=events)
        assert events == {"reset", "pause"}
        hid.unplug()  # connection state is the SpaceMouse's
        assert not wait_for(dev, lambda r: not r.connected).active
    finally:
        dev.close()
