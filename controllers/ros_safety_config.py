"""Parameters of the safety nodes (``robot_rl_controllers.ros_safety_node``): one dataclass per node, declared as
ROS 2 parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from robot_rl.safety.limits import ArmLimits, CarLimits


@dataclass
class SafetyConfig:
    """Watchdog and reporting parameters common to the arm and car safety nodes."""

    startup_only: ClassVar[tuple[str, ...]] = ("watchdog_rate_hz", "diagnostics_rate_hz")
    """Read when the node starts (rates, scene, cameras): read-only parameters."""

    watchdog_timeout: float = 0.075
    """Commands older than this (s) are stale: hold (arm) / stop (car). Default 1.5 periods of a 20 Hz policy."""
    watchdog_rate_hz: float = 200.0
    """How often staleness is checked, on a thread of its own (and a car's stop command repeated)."""
    diagnostics_rate_hz: float = 5.0
    """Rate of the diagnostics topic (it is also published on every state change)."""

    def validate(self) -> None:
        if min(self.watchdog_timeout, self.watchdog_rate_hz, self.diagnostics_rate_hz) <= 0:
            raise ValueError("watchdog_timeout, watchdog_rate_hz and diagnostics_rate_hz must be > 0")


@dataclass
class ArmSafetyConfig(SafetyConfig):
    """Parameters of the arm safety node: the watchdog fields plus the limits (parameters ``limits.<field>``)."""

    startup_only: ClassVar[tuple[str, ...]] = (*SafetyConfig.startup_only, "profile")

    profile: str = ""
    """Robot profile (bundled name or YAML path, :mod:`robot_rl.robots.profile`) whose driver this node commands:
    the measured state comes from its joint states and URDF, filtered targets go out in its command interface, and
    the limits are the profile's. "" = robot_rl's own controller topics (``ee_pose`` in, ``controller/target_pose``
    out)."""
    limits: ArmLimits = field(default_factory=ArmLimits)
    """The limits, the same dataclass (and defaults) the robot env applies (with a profile: the profile's)."""
    stop_deceleration: float = 2.0
    """Deceleration (m/s^2) of the controlled stop when the watchdog fires or the e-stop latches: the hold target
    moves on from the measured EE position along its velocity, slowing at this rate to rest (no rebound), instead
    of jumping to where the arm is. 0 = hold the measured pose at once."""
    stop_lead_s: float = 0.1
    """How far (in seconds of motion) an impedance-controlled arm trails its target at constant speed (its
    damping over stiffness: 2 / sqrt(kp) = 0.1 s for the default controller). The stop target leads the planned
    stop trajectory by this much, so the arm follows the trajectory instead of being pulled back at the start."""
    state_timeout: float = 0.5
    """The measured state (joint states, or ``ee_pose``) silent this long (s, wall clock) is stale: nothing is
    commanded until it returns, and then the measured pose is the hold (a restarted driver, a paused stream)."""
    reanchor_distance: float = 0.01
    """The measured tool farther than this (m, on an axis) from where the node holds it (plus
    ``limits.max_target_lead`` while the policy commands) means the arm was moved by something else (a hand, a
    restarted driver): the measured pose becomes the hold and nothing is commanded until the policy's next target.
    Each such re-anchor is counted in the diagnostics (``reanchors``) and logged with its cause."""

    def validate(self) -> None:
        super().validate()
        self.limits.validate()
        if self.stop_deceleration < 0 or self.stop_lead_s < 0:
            raise ValueError("stop_deceleration and stop_lead_s must be >= 0")
        if self.state_timeout <= 0 or self.reanchor_distance <= 0:
            raise ValueError("state_timeout and reanchor_distance must be > 0")


@dataclass
class CarSafetyConfig(SafetyConfig):
    """Parameters of the car safety node."""

    startup_only: ClassVar[tuple[str, ...]] = (*SafetyConfig.startup_only, "profile")

    profile: str = ""
    """Car profile (bundled name or YAML path, :mod:`robot_rl.robots.car_profile`) whose driver this node commands:
    checked twists go out in its command interface (``diff_drive_controller``'s TwistStamped, an Ackermann drive) and
    the limits are the profile's. "" = robot_rl's own driving controller (``controller/cmd_vel``, Twist)."""
    limits: CarLimits = field(default_factory=CarLimits)
    """Speed and yaw-rate limits (with a profile: the profile's)."""

    def validate(self) -> None:
        super().validate()
        self.limits.validate()
