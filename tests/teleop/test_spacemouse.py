"""SpaceMouse: the real HID report parser and reader thread fed with byte reports in the 3Dconnexion formats
(separate translation/rotation/button reports and the combined 13-byte report) from a hid-like source that
can be unplugged (read raises OSError) and plugged back."""

from __future__ import annotations

import queue
import struct

import numpy as np
import pytest

from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.mapping import TeleopDeviceError
from robot_rl.teleop.spacemouse import SpaceMouse, find_spacemouse, parse_report
from tests.teleop.helpers import collect_events, wait_for

pytestmark = pytest.mark.timeout(30)


def translation(x: int, y: int, z: int) -> list[int]:
    return [1, *struct.pack("<hhh", x, y, z)]


def rotation(rx: int, ry: int, rz: int) -> list[int]:
    return [2, *struct.pack("<hhh", rx, ry, rz)]


def combined(*values: int) -> list[int]:
    return [1, *struct.pack("<hhhhhh", *values)]


def buttons(mask: int) -> list[int]:
    return [3, mask & 0xFF, mask >> 8]


class FakeHid:
    """Stands in for the USB device (not for the code under test): a stream of reports, then a read error."""

    def __init__(self) -> None:
        self.reports: queue.Queue = queue.Queue()
        self.closed = False

    def send(self, *reports: list[int]) -> None:
        for r in reports:
            self.reports.put(r)

    def unplug(self) -> None:
        self.reports.put(OSError("read error"))

    def read(self, max_length: int, timeout_ms: int = 0) -> list[int]:
        try:
            item = self.reports.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return []  # hidapi's answer to a timeout: the cap is not moving
        if isinstance(item, OSError):
            raise item
        return item[:max_length]

    def close(self) -> None:
        self.closed = True


def test_parse_report_formats() -> None:
    axes, held = parse_report(translation(350, -175, 35))
    assert held is None and axes == pytest.approx({"x": 1.0, "y": 0.5, "z": -0.1})  # y and z flipped: y fwd, z up
    axes, _ = parse_report(rotation(-350, 70, 700))
    assert axes == pytest.approx({"roll": -1.0, "pitch": -0.2, "yaw": -1.0})  # clipped to [-1, 1]
    axes, _ = parse_report(combined(35, 70, 105, 140, 175, 210))
    assert axes == pytest.approx({"x": 0.1, "y": -0.2, "z": -0.3, "roll": 0.4, "pitch": -0.5, "yaw": -0.6})
    assert parse_report(buttons(0b101)) == ({}, {"b0", "b2"})
    assert parse_report(buttons(1 << 9))[1] == {"b9"}  # SpaceMouse Pro/Enterprise: many buttons, two bytes
    assert parse_report(buttons(0))[1] == set()
    assert parse_report([]) == ({}, None) and parse_report([23, 1, 2]) == ({}, None)  # other reports: ignored


def test_find_spacemouse_prefers_the_multi_axis_interface() -> None:
    devices = [{"vendor_id": 0x1234, "product_id": 1, "path": b"a", "usage_page": 1, "usage": 8},
               {"vendor_id": 0x256F, "product_id": 0xC652, "path": b"kbd", "usage_page": 1, "usage": 6},
               {"vendor_id": 0x256F, "product_id": 0xC652, "path": b"axes", "usage_page": 1, "usage": 8}]
    assert find_spacemouse(lambda: devices)["path"] == b"axes"
    assert find_spacemouse(lambda: [{"vendor_id": 0x046D, "product_id": 0xC626, "path": b"sn"}])["path"] == b"sn"
    assert find_spacemouse(lambda: [{"vendor_id": 0x046D, "product_id": 0xC52B, "path": b"mouse"}]) is None


def test_spacemouse_stream_to_actions_events_and_unplug() -> None:
    sources = [FakeHid(), FakeHid()]
    opened = []

    def open_device() -> FakeHid:
        if not sources:
            raise OSError("no device")
        opened.append(sources.pop(0))
        return opened[-1]

    dev = SpaceMouse(TeleopConfig(device="spacemouse"), 4, open_device=open_device)
    hid = opened[0]
    try:
        r = dev.read()
        assert r.connected and not r.active and np.array_equal(r.action, [0, 0, 0, -1])  # gripper starts open
        hid.send(translation(0, -350, 0), rotation(0, 0, 0))  # push the cap forward (device y is towards you)
        r = wait_for(dev, lambda r: r.active)
        np.testing.assert_allclose(r.action, [1, 0, 0, -1])  # default map: robot x = forward
        hid.send(translation(-175, 0, -350))  # left and up
        r = wait_for(dev, lambda r: r.action[1] > 0)
        np.testing.assert_allclose(r.action, [0, (0.5 - 0.1) / 0.9, 1, -1], atol=1e-6)  # deadzone rescales
        hid.send(translation(20, -20, 30))  # tiny drift inside the deadzone: nobody is steering
        r = wait_for(dev, lambda r: not r.active)
        np.testing.assert_array_equal(r.action, [0, 0, 0, -1])
        hid.send(buttons(1), buttons(0))  # left button tap: gripper toggles closed, one active read
        r = wait_for(dev, lambda r: r.action[3] == 1.0)
        assert r.active and not dev.read().active
        hid.send(buttons(2))  # right button: success, reported once however long it is held
        assert collect_events(dev, "success") == ["success"]
        hid.send(buttons(0), buttons(2), buttons(0))  # released and pressed again: a new press
        assert collect_events(dev, "success") == ["success"]
        dev.reset()  # new episode: gripper open again
        assert dev.read().action[3] == -1.0
        hid.send(translation(0, -350, 0))
        wait_for(dev, lambda r: r.active)
        hid.unplug()  # cable out while deflected: disconnected, nothing steers
        r = wait_for(dev, lambda r: not r.connected)
        assert not r.active and np.array_equal(r.action, np.zeros(4)) and hid.closed
        r = wait_for(dev, lambda r: r.connected)  # plugged back: reopened, no stale deflection
        assert not r.active and len(opened) == 2
        opened[1].send(translation(0, 0, 350))
        r = wait_for(dev, lambda r: r.active)
        np.testing.assert_allclose(r.action[:3], [0, 0, -1])
    finally:
        dev.close()
    assert not dev._thread.is_alive()


def test_spacemouse_config_axes_scale_and_deadman() -> None:
    hid = FakeHid()
    cfg = TeleopConfig(device="spacemouse", axes=("-x", "0", "yaw", "gripper"), scale=(0.5, 1, 1, 1), deadzone=0.0,
                       takeover="deadman", buttons={"b1": "takeover", "b0": "gripper"}, gripper_mode="hold",
                       reconnect=False)
    dev = SpaceMouse(cfg, 4, open_device=lambda: hid)
    try:
        hid.send(combined(350, 0, 0, 0, 0, 175))
        r = wait_for(dev, lambda r: r.action[0] != 0)
        np.testing.assert_allclose(r.action, [-0.5, 0, -0.5, -1])
        assert not r.active  # deadman: moving the cap alone does not take over
        hid.send(buttons(0b11))  # deadman held + gripper held (hold mode: closed while held)
        r = wait_for(dev, lambda r: r.active)
        assert r.action[3] == 1.0
        hid.send(buttons(0))
        r = wait_for(dev, lambda r: not r.active)
        assert r.action[3] == -1.0
        hid.unplug()
        wait_for(dev, lambda r: not r.connected)
        dev._thread.join(2.0)
        assert not dev._thread.is_alive()  # reconnect off: the reader ends
    finally:
        dev.close()
    with pytest.raises(ValueError, match="maps 3 action dimensions"):
        SpaceMouse(TeleopConfig(device="spacemouse", axes=("x", "y", "z")), 4, open_device=FakeHid)
    with pytest.raises(ValueError, match="no axis 'q'"):
        SpaceMouse(TeleopConfig(device="spacemouse", axes=("x", "y", "q", "gripper")), 4, open_device=FakeHid)
    with pytest.raises(ValueError, match="needs a button mapped to 'takeover'"):
        SpaceMouse(TeleopConfig(device="spacemouse", takeover="toggle"), 4, open_device=FakeHid)


def test_spacemouse_not_found() -> None:
    def missing() -> FakeHid:
        raise OSError("no 3Dconnexion SpaceMouse found")

    with pytest.raises(TeleopDeviceError, match="no 3Dconnexion SpaceMouse found"):
        SpaceMouse(TeleopConfig(device="spacemouse"), 4, open_device=missing)
