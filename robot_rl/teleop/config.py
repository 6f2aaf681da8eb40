"""Configuration of the teleoperation side of a run: which device, how its input maps to actions, and what the
intervention wrapper does with it (``TrainConfig.teleop``; CLI ``--teleop.device scripted`` etc.).

Mapping, the same for every device: a device exposes named **axes** (values in [-1, 1]) and named **buttons**.
``axes`` lists, per action dimension, the device axis that drives it (``"-y"`` inverts, ``"gripper"`` is the
button-driven gripper, ``"0"`` is always zero); ``buttons`` maps a device button to a function (an episode event,
the gripper, the takeover button, or ``"+z"`` / ``"-z"``: deflect a virtual axis while held). Empty ``axes`` or
``buttons`` take the device's defaults for the action size (docs/guides/demos-and-teleop.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from robot_rl.config import JsonDict
from robot_rl.teleop.scripted import ScriptedHumanConfig

DEVICES = ("none", "scripted", "keyboard", "gamepad", "spacemouse", "ros")
TAKEOVER_MODES = ("motion", "deadman", "toggle")
GRIPPER_MODES = ("toggle", "hold")
ROS_MESSAGES = ("joy", "twist")
BUTTON_FUNCTIONS = ("success", "failure", "reset", "pause", "ready", "stop", "gripper", "gripper_open", "gripper_close",
                    "takeover")


@dataclass(frozen=True)
class TeleopConfig:
    """Teleoperation device and interventions."""

    device: str = "none"
    """Who may take over: none | scripted (the task's expert, sim only) | keyboard | gamepad | spacemouse | ros."""
    success_reward: float = 1.0
    """Reward of a step the human labels a success (the episode then ends)."""
    start: Literal["auto", "ready", "countdown", "now"] = "auto"
    """Training: how each episode starts. ready: the robot is held until the operator presses the ready key or
    button (the success key counts too); countdown: after ``countdown_s`` seconds (ready starts it earlier); now:
    at once. auto: ready for a person's device, now for the scripted human and for ROS Twist input (it has no
    buttons). Nothing is recorded while waiting, and a sim stands still (its step limit does not run)."""
    countdown_s: float = 3.0
    """Seconds of the ``start: countdown`` wait."""
    episode_seconds: float = 0.0
    """Training: a person's time limit per episode, in seconds of the episode's running time (waiting and paused
    time excluded); the episode is truncated when it runs out, and the operator view shows the time left. 0: none
    (the env's own step limit still applies)."""
    scripted: ScriptedHumanConfig = field(default_factory=ScriptedHumanConfig)
    """The scripted human's takeover rule (device: scripted)."""
    deadzone: float = 0.1
    """Axis values with ``|v| < deadzone`` read as 0; the rest is rescaled so the output still spans [-1, 1]."""
    scale: tuple[float, ...] = (1.0,)
    """Gain on the mapped axes: one value for all, or one per action dimension (the result is clipped to
    [-1, 1]). For ``ros_msg: twist`` this converts m/s and rad/s to action units (e.g. 1 / max speed)."""
    axes: tuple[str, ...] = ()
    """Device axis per action dimension, e.g. ``["y", "-x", "z", "gripper"]``; ``-`` inverts, ``gripper`` is the
    latched gripper command (-1 open, +1 closed), ``0`` is always zero. Empty: the device's default for the
    action size (4: x y z + gripper, 7: x y z roll pitch yaw + gripper, 2: the car's speed and yaw rate). On the
    command line write an inverted axis with a leading space (``--teleop.axes y ' -x' z gripper``), or use YAML."""
    buttons: JsonDict = field(default_factory=dict)
    """Device button (keyboard: key name such as ``w``, ``enter``, ``up``; gamepad/Joy: ``b0``, ``b1``...;
    SpaceMouse: ``b0``, ``b1``...) to function: success | failure | reset | pause | gripper | gripper_open |
    gripper_close | takeover | ``+<axis>`` / ``-<axis>``. Empty: the device's defaults."""
    gripper_mode: str = "toggle"
    """toggle: each press of the ``gripper`` button flips open/closed; hold: closed while it is held."""
    gripper_init: float = -1.0
    """Gripper command at the start of each episode (-1 open, +1 closed)."""
    takeover: str = "motion"
    """When the human is ``active`` (steers instead of the policy): motion (any axis beyond the deadzone or a
    gripper press), deadman (only while the ``takeover`` button is held) or toggle (its press toggles takeover)."""
    key_hold_s: float = 0.6
    """Keyboard: a key counts as held this long after its last press. Terminals send no key releases, only
    autorepeat, so this must cover the autorepeat delay (typically 0.25-0.66 s) for a held key to stay held."""
    disconnect_timeout_s: float = 0.5
    """ROS input: no message for this long means disconnected (the robot is held). Keyboard, gamepad and
    SpaceMouse report a disconnect at once (stdin closed, joystick removed, HID read error)."""
    reconnect: bool = True
    """Keep trying to reopen a gamepad or SpaceMouse that disconnected (connected again once it is back)."""
    device_path: str = ""
    """Which device: keyboard: a terminal path (default: this process's stdin); gamepad: joystick index (default
    0); SpaceMouse: a hidraw path or ``vendor:product`` in hex (default: the first 3Dconnexion device)."""
    ros_topic: str = "joy"
    """ROS 2 topic of the teleop input (e.g. ``joy`` from joy_node, ``cmd_vel`` from a Twist teleop node)."""
    ros_msg: str = "joy"
    """Message type of ``ros_topic``: joy (sensor_msgs/Joy: axes ``a0``.., buttons ``b0``..) or twist
    (geometry_msgs/Twist: axes ``linear.x`` .. ``angular.z``, no buttons)."""

    def start_mode(self) -> str:
        """``start`` with auto resolved: ready for a person's device, now for the scripted human (or none) and for
        ROS Twist input (no buttons to press)."""
        if self.start != "auto":
            return self.start
        buttonless = self.device == "ros" and self.ros_msg == "twist"
        return "now" if self.device in ("none", "scripted") or buttonless else "ready"

    def validate(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"teleop.device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        self.scripted.validate()
        if not 0.0 <= self.deadzone < 1.0:
            raise ValueError(f"teleop.deadzone must be in [0, 1), got {self.deadzone}")
        if not self.scale:
            raise ValueError("teleop.scale needs one value or one per action dimension")
        for name, value, allowed in (("takeover", self.takeover, TAKEOVER_MODES),
                                     ("gripper_mode", self.gripper_mode, GRIPPER_MODES),
                                     ("ros_msg", self.ros_msg, ROS_MESSAGES)):
            if value not in allowed:
                raise ValueError(f"teleop.{name} must be one of {', '.join(allowed)}, got {value!r}")
        if self.start not in ("auto", "ready", "countdown", "now"):
            raise ValueError(f"teleop.start must be auto, ready, countdown or now, got {self.start!r}")
        if self.countdown_s < 0 or self.episode_seconds < 0:
            raise ValueError("teleop.countdown_s and teleop.episode_seconds must be >= 0")
        if self.key_hold_s <= 0 or self.disconnect_timeout_s <= 0:
            raise ValueError("teleop.key_hold_s and teleop.disconnect_timeout_s must be > 0")
        if not -1.0 <= self.gripper_init <= 1.0:
            raise ValueError(f"teleop.gripper_init must be in [-1, 1], got {self.gripper_init}")
        for button, function in self.buttons.items():
            if function not in BUTTON_FUNCTIONS and not (function[:1] in "+-" and len(function) > 1):
                raise ValueError(f"teleop.buttons.{button}: unknown function {function!r} (one of "
                                 f"{', '.join(BUTTON_FUNCTIONS)}, or +<axis> / -<axis>)")
