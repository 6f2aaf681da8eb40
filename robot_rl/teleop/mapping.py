"""From raw device input to a :class:`~robot_rl.teleop.base.TeleopReading`, shared by every hardware device.

A device's reader thread calls :meth:`InputMap.update` with what it saw (named axes in [-1, 1], the set of buttons
held); the control loop calls :meth:`InputMap.reading`, which never blocks for longer than a lock held for
microseconds. Button presses are turned into events on the reader thread (rising edges), so a press shorter
than a control period is still reported once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from robot_rl.teleop.base import EVENTS, TeleopReading, apply_deadzone
from robot_rl.teleop.config import BUTTON_FUNCTIONS, TeleopConfig


class TeleopDeviceError(RuntimeError):
    """A teleop device cannot be used: not found, library missing, no permission."""


def default_axes(action_dim: int, six_dof: Sequence[str], car: Sequence[str]) -> tuple[str, ...]:
    """A device's default axis map for an action size: 4 = xyz + gripper, 7 = xyz rpy + gripper, 2 = car."""
    if action_dim == 2:
        return tuple(car)
    if action_dim in (4, 7):
        return (*six_dof[: action_dim - 1], "gripper")
    if action_dim <= len(six_dof):
        return tuple(six_dof[:action_dim])
    raise ValueError(f"no default teleop axis map for {action_dim}-D actions: set teleop.axes")


class InputMap:
    """Applies a :class:`TeleopConfig`'s axis map, deadzone, scale, button map and takeover mode (thread-safe)."""

    def __init__(self, cfg: TeleopConfig, action_dim: int, default_axes: Sequence[str],
                 default_buttons: Mapping[str, str], axis_names: Iterable[str] | None = None) -> None:
        cfg.validate()
        self.cfg, self.action_dim = cfg, int(action_dim)
        self.buttons = dict(cfg.buttons or default_buttons)
        virtual = {f[1:] for f in self.buttons.values() if f[:1] in "+-"}
        known = None if axis_names is None else set(axis_names) | virtual
        self.sources: list[tuple[str, str, float]] = []  # per action dim: (kind, axis name, sign)
        for i, spec in enumerate(cfg.axes or default_axes):
            spec = spec.strip()
            if spec in ("gripper", "0", ""):
                self.sources.append((spec or "0", "", 1.0))
                continue
            sign, name = (-1.0, spec[1:]) if spec[0] == "-" else (1.0, spec.lstrip("+"))
            if known is not None and name not in known:
                raise ValueError(f"teleop.axes[{i}]: no axis {name!r} on this device "
                                 f"(axes: {', '.join(sorted(known))})")
            self.sources.append(("axis", name, sign))
        if len(self.sources) != self.action_dim:
            raise ValueError(f"teleop.axes maps {len(self.sources)} action dimensions, the env has {self.action_dim}")
        scale = np.asarray(cfg.scale, np.float32)
        if scale.size not in (1, self.action_dim):
            raise ValueError(f"teleop.scale has {scale.size} values; give 1 or {self.action_dim}")
        self.scale = np.broadcast_to(scale, (self.action_dim,)).astype(np.float32)
        functions = set(self.buttons.values())
        if cfg.takeover != "motion" and "takeover" not in functions:
            raise ValueError(f"teleop.takeover: {cfg.takeover} needs a button mapped to 'takeover' in teleop.buttons")
        for function in functions - set(BUTTON_FUNCTIONS):
            if function[:1] not in "+-":
                raise ValueError(f"teleop.buttons: unknown function {function!r}")
        self._lock = threading.Lock()
        self._axes: dict[str, float] = {}
        self._pressed: set[str] = set()
        self._events: set[str] = set()
        self._gripper = float(cfg.gripper_init)
        self._gripper_moved = False
        self._takeover = False

    def update(self, axes: Mapping[str, float] | None = None, pressed: Iterable[str] | None = None) -> None:
        """New raw input: ``axes`` (partial updates keep the other axes), ``pressed`` (all buttons held now)."""
        with self._lock:
            if axes:
                self._axes.update({k: float(v) for k, v in axes.items()})
            if pressed is None:
                return
            pressed = set(pressed)
            for button in pressed - self._pressed:  # rising edges
                self._press(self.buttons.get(button, ""))
            grip = {b for b, f in self.buttons.items() if f == "gripper"}
            if self.cfg.gripper_mode == "hold" and grip & (self._pressed ^ pressed):
                self._gripper = 1.0 if grip & pressed else -1.0
                self._gripper_moved = True
            self._pressed = pressed

    def _press(self, function: str) -> None:
        if function in EVENTS:
            self._events.add(function)
        elif function == "takeover":
            self._takeover = not self._takeover
        elif function in ("gripper", "gripper_open", "gripper_close"):
            if function == "gripper" and self.cfg.gripper_mode == "toggle":
                self._gripper = 1.0 if self._gripper <= 0 else -1.0
            elif function != "gripper":
                self._gripper = 1.0 if function == "gripper_close" else -1.0
            self._gripper_moved = True

    def release(self) -> None:
        """Every axis back to 0 and no button held (a device that went away must not leave a deflection)."""
        with self._lock:
            self._axes = dict.fromkeys(self._axes, 0.0)
            self._pressed = set()

    def reset(self) -> None:
        """A new episode: gripper back to ``gripper_init``, takeover off, pending events dropped."""
        with self._lock:
            self._gripper, self._gripper_moved = float(self.cfg.gripper_init), False
            self._takeover = False
            self._events.clear()

    def _axis(self, name: str) -> float:
        value = self._axes.get(name, 0.0)
        for button in self._pressed:  # buttons that deflect a virtual axis ("+z" / "-z")
            function = self.buttons.get(button, "")
            if function[1:] == name and function[:1] in "+-":
                value += 1.0 if function[0] == "+" else -1.0
        return value

    def reading(self, connected: bool = True) -> TeleopReading:
        """The action now, the events since the last call, and whether the human is steering."""
        with self._lock:
            raw = np.array([sign * self._axis(name) if kind == "axis" else 0.0
                            for kind, name, sign in self.sources], np.float32)
            motion = apply_deadzone(np.clip(raw, -1.0, 1.0), self.cfg.deadzone) * self.scale
            action = np.clip(motion, -1.0, 1.0).astype(np.float32)
            functions = {self.buttons.get(b, "") for b in self._pressed}
            if self.cfg.takeover == "deadman":
                active = "takeover" in functions
            elif self.cfg.takeover == "toggle":
                active = self._takeover
            else:
                active = bool(np.any(action != 0.0)) or self._gripper_moved or "gripper" in functions
            for i, (kind, _, _) in enumerate(self.sources):
                if kind == "gripper":
                    action[i] = self._gripper
            events, self._events = frozenset(self._events), set()
            self._gripper_moved = False
        if not connected:  # a device that is gone steers nothing
            return TeleopReading(np.zeros(self.action_dim, np.float32), active=False, events=events, connected=False)
        return TeleopReading(action, active=active, events=events, connected=True)


class ThreadedDevice:
    """Base of the hardware devices: ``_run`` reads the hardware on a daemon thread and feeds ``self.map``;
    ``read()`` returns the mapped state at once. Subclasses set ``connected`` and poll ``self._stop``."""

    name = "device"

    def __init__(self, input_map: InputMap) -> None:
        self.map = input_map
        self.action_dim = input_map.action_dim
        self.connected = False
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._guarded_run, name=f"teleop-{self.name}", daemon=True)
        self._thread.start()

    def _guarded_run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a reader that dies must read as "disconnected", never as "no input"
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.connected = False

    def _run(self) -> None:
        raise NotImplementedError

    def read(self) -> TeleopReading:
        return self.map.reading(self.connected)

    def reset(self) -> None:
        self.map.reset()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
