"""3Dconnexion SpaceMouse over raw HID (hidapi): no 3Dconnexion driver or spacenavd needed.

Report formats (input reports, first byte = report id; axis values are little-endian int16, about +-350 at full
deflection):

* id 1, 7 bytes: translation x, y, z; id 2, 7 bytes: rotation rx, ry, rz (SpaceNavigator, SpaceMouse Pro,
  Wireless, Enterprise and most older devices send the two as separate reports);
* id 1, 13 bytes: translation and rotation in one report (newer devices, e.g. SpaceMouse Compact);
* id 3: buttons, a little-endian bit mask (bit k = button ``b<k>``).

The device's frame (x right, y towards the user, z down) is turned into a right-handed frame with x right,
y forward (away from the user), z up: axes ``x y z roll pitch yaw`` in [-1, 1]. The device sends reports only
while the cap moves (and a zero report on release), so the last values hold between reports. A read error
(unplugged, USB reset) makes the device ``connected=False`` at once; with ``reconnect`` it is reopened when back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from robot_rl.teleop.config import TeleopConfig
from robot_rl.teleop.mapping import InputMap, TeleopDeviceError, ThreadedDevice, default_axes

FULL_SCALE = 350.0
AXES = ("x", "y", "z", "roll", "pitch", "yaw")
SIX_DOF = ("y", "-x", "z", "pitch", "-roll", "yaw")  # robot x forward, y left, z up; the user behind the robot
CAR = ("y", "yaw")
DEFAULT_BUTTONS = {"b0": "gripper", "b1": "success"}
VENDOR_3DCONNEXION, VENDOR_LOGITECH = 0x256F, 0x046D
# 3Dconnexion devices sold under Logitech's vendor id (SpaceNavigator .. SpaceMouse Compact, Universal Receiver).
LOGITECH_PRODUCTS = {0xC603, 0xC605, 0xC606, 0xC621, 0xC623, 0xC625, 0xC626, 0xC627, 0xC628, 0xC629, 0xC62B,
                     0xC62E, 0xC62F, 0xC631, 0xC632, 0xC633, 0xC635, 0xC636, 0xC652}
READ_TIMEOUT_MS = 50
RETRY_S = 0.5


class HidSource(Protocol):
    """What the reader needs of an open HID device (``hid.device`` from hidapi has it)."""

    def read(self, max_length: int, timeout_ms: int = 0) -> Sequence[int]: ...

    def close(self) -> None: ...


def _int16(data: Sequence[int], i: int) -> float:
    return int.from_bytes(bytes(data[i:i + 2]), "little", signed=True) / FULL_SCALE


def parse_report(data: Sequence[int]) -> tuple[dict[str, float], set[str] | None]:
    """One HID input report -> (axis values it carries, buttons held or None when it carries no buttons)."""
    if not data:
        return {}, None
    rid, axes = data[0], {}
    if rid == 1 and len(data) >= 7:
        axes.update(x=_int16(data, 1), y=-_int16(data, 3), z=-_int16(data, 5))
        if len(data) >= 13:  # combined translation + rotation report
            axes.update(roll=_int16(data, 7), pitch=-_int16(data, 9), yaw=-_int16(data, 11))
    elif rid == 2 and len(data) >= 7:
        axes.update(roll=_int16(data, 1), pitch=-_int16(data, 3), yaw=-_int16(data, 5))
    elif rid == 3:
        mask = int.from_bytes(bytes(data[1:]), "little")
        return {}, {f"b{k}" for k in range(mask.bit_length()) if mask >> k & 1}
    return {k: max(-1.0, min(1.0, v)) for k, v in axes.items()}, None


def find_spacemouse(enumerate_fn: Callable[[], list[dict[str, Any]]] | None = None) -> dict[str, Any] | None:
    """The first 3Dconnexion device hidapi lists (the multi-axis interface when a receiver exposes several)."""
    if enumerate_fn is None:
        import hid  # optional: teleop

        enumerate_fn = hid.enumerate
    found = [d for d in enumerate_fn() if d["vendor_id"] == VENDOR_3DCONNEXION
             or (d["vendor_id"] == VENDOR_LOGITECH and d["product_id"] in LOGITECH_PRODUCTS)]
    found.sort(key=lambda d: (d.get("usage_page"), d.get("usage")) != (1, 8))  # Generic Desktop / Multi-axis
    return found[0] if found else None


def hid_open(device_path: str = "") -> HidSource:
    """Opens a SpaceMouse with hidapi: ``device_path`` a hidraw path, ``vendor:product`` in hex, or "" (the
    first one found). Raises OSError when there is none or it cannot be opened (permissions:
    docs/troubleshooting.md)."""
    try:
        import hid  # optional: teleop
    except ImportError as exc:
        raise OSError(f"hidapi is not installed (pip install 'robot-rl[teleop]'): {exc}") from exc
    dev = hid.device()
    if device_path and ":" in device_path and not device_path.startswith("/"):
        vid, pid = (int(part, 16) for part in device_path.split(":", 1))
        dev.open(vid, pid)
    elif device_path:
        dev.open_path(device_path.encode())
    else:
        info = find_spacemouse()
        if info is None:
            raise OSError("no 3Dconnexion SpaceMouse found (hidapi lists none; check the cable and the udev rule)")
        dev.open_path(info["path"])
    dev.set_nonblocking(0)
    return dev


class SpaceMouse(ThreadedDevice):
    """SpaceMouse teleop device; ``open_device()`` returns an open :class:`HidSource` (default: hidapi)."""

    name = "spacemouse"

    def __init__(self, cfg: TeleopConfig, action_dim: int,
                 open_device: Callable[[], HidSource] | None = None) -> None:
        super().__init__(InputMap(cfg, action_dim, default_axes(action_dim, SIX_DOF, CAR), DEFAULT_BUTTONS, AXES))
        self.reconnect = cfg.reconnect
        self.open_device = open_device or (lambda: hid_open(cfg.device_path))
        try:
            self._source: HidSource | None = self.open_device()
        except OSError as exc:
            raise TeleopDeviceError(f"spacemouse: {exc}") from exc
        self.connected = True
        self.reports = 0
        self.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            source, self._source = self._source, None
            if source is None:
                try:
                    source = self.open_device()
                except OSError:
                    self._stop.wait(RETRY_S)
                    continue
            self.connected = True
            try:
                self._pump(source)
            except OSError as exc:
                self.error = f"HID read failed: {exc}"
            finally:
                self.connected = False
                self.map.release()  # never resume with a stale deflection
                source.close()
            if not self.reconnect:
                return
            self._stop.wait(RETRY_S)  # a replugged device needs a moment to enumerate again

    def _pump(self, source: HidSource) -> None:
        while not self._stop.is_set():
            data = source.read(64, READ_TIMEOUT_MS)
            if not data:
                continue
            axes, buttons = parse_report(data)
            self.map.update(axes, buttons)
            self.reports += 1
            self.last_report = time.monotonic()
