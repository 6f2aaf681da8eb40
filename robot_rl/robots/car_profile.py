"""Car profiles: a ROS 2 car's odometry, pose, lidar and drive command, by config alone (``kind: car`` in a profile
YAML; loaded by :func:`robot_rl.robots.profile.load_profile`).

The Drive task's state comes from what a car stack has: the body twist from ``nav_msgs/Odometry``, the pose of
``base_frame`` in ``map_frame`` from TF (wheel odometry, or a localiser's ``map`` frame), the wall distances from a
``sensor_msgs/LaserScan`` (moved from the laser's frame into the car's through TF), and checkpoints, progress and
success from the track map laid out in ``map_frame``. The policy's twist goes, through the safety node, to
``diff_drive_controller`` (``TwistStamped``) or to an F1TENTH-style ``/drive`` (``AckermannDriveStamped``, the twist
turned into a steering angle through the wheelbase).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_rl.config import ConfigError
from robot_rl.safety.limits import CarLimits

CAR_INTERFACES = ("diff_drive", "ackermann")
"""Car command interfaces: ros2_controllers' ``diff_drive_controller`` (``geometry_msgs/TwistStamped`` on its
``~/cmd_vel``) or an Ackermann drive topic (``ackermann_msgs/AckermannDriveStamped``, F1TENTH's ``/drive``)."""
COLLISION_SOURCES = ("scan", "topic", "none")
"""Where a wall contact is seen: the scan (a return closer than ``collision.distance`` to the car's origin), a
``std_msgs/Bool`` topic, or nowhere."""


@dataclass
class CarCommandProfile:
    """The drive command the safety node sends to the driver."""

    interface: str = "diff_drive"
    """One of :data:`CAR_INTERFACES`."""
    topic: str = ""
    """The driver's command topic (``/diff_drive_controller/cmd_vel``, ``/drive``)."""
    frame: str = "base_link"
    """``header.frame_id`` of the commands."""
    wheelbase: float = 0.0
    """``ackermann``: front-to-rear axle distance (m); the steering angle is ``atan(wheelbase * yaw rate / speed)``."""
    max_steering_angle: float = 0.0
    """``ackermann``: largest |steering angle| sent (rad)."""
    controller: str = ""
    """ros2_control controller that must be active (``diff_drive_controller``); empty: not checked."""
    controller_manager: str = "/controller_manager"
    """Namespace of the controller manager whose ``list_controllers`` is asked."""


@dataclass
class OdomSource:
    """The body twist."""

    topic: str = "/odom"
    """``nav_msgs/Odometry`` topic; its twist is in the child (body) frame."""


@dataclass
class ScanSource:
    """The lidar."""

    topic: str = "/scan"
    """``sensor_msgs/LaserScan`` topic; its header's frame is located in ``base_frame`` through TF."""


@dataclass
class CollisionSource:
    """How a wall contact is seen."""

    source: str = "scan"
    """One of :data:`COLLISION_SOURCES`."""
    distance: float = 0.2
    """``scan``: a return closer than this to the car's origin (m) is a contact."""
    topic: str = ""
    """``topic``: a ``std_msgs/Bool`` topic (true = contact)."""


@dataclass
class TrackProfile:
    """The track map in ``map_frame``: a rounded-rectangle centreline (robot_rl.robots.track.TrackMap)."""

    size: tuple[float, float] = (6.0, 4.0)
    """Outer size (x, y) of the centreline (m)."""
    corner_radius: float = 1.2
    """Radius of the centreline's corners (m)."""
    width: float = 1.0
    """Distance between the walls (m)."""
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Pose (x, y, yaw: m, m, rad) of the track's centre in ``map_frame``: where the rectangle lies and which way
    its first straight points (with wheel odometry, ``odom`` is where the car started, on the centreline)."""


@dataclass
class CarProfile:
    """A car on ROS 2 (see the module docstring)."""

    name: str = ""
    """Set from the file name when loaded."""
    kind: str = "car"
    """``car``."""
    description: str = ""
    """One line: which car and driver."""
    base_frame: str = "base_link"
    """The car's body frame."""
    map_frame: str = "odom"
    """Frame the pose is read in and the track map is laid out in (``odom`` for wheel odometry, ``map`` with a
    localiser)."""
    odom: OdomSource = field(default_factory=OdomSource)
    """The body twist."""
    scan: ScanSource = field(default_factory=ScanSource)
    """The lidar."""
    collision: CollisionSource = field(default_factory=CollisionSource)
    """How a wall contact is seen."""
    track: TrackProfile = field(default_factory=TrackProfile)
    """The track map."""
    command: CarCommandProfile = field(default_factory=CarCommandProfile)
    """The drive command."""
    limits: CarLimits = field(default_factory=CarLimits)
    """Speed and yaw-rate limits both safety layers apply (the policy's action scale)."""

    def validate(self) -> None:
        if self.command.interface not in CAR_INTERFACES:
            raise ConfigError(f"command.interface: {self.command.interface!r} is not one of {list(CAR_INTERFACES)}")
        if self.collision.source not in COLLISION_SOURCES:
            raise ConfigError(f"collision.source: {self.collision.source!r} is not one of {list(COLLISION_SOURCES)}")
        self.limits.validate()
        if not self.command.topic:
            raise ConfigError(f"command.topic: the {self.command.interface} interface needs the driver's topic")
        if not (self.base_frame and self.map_frame and self.odom.topic and self.scan.topic):
            raise ConfigError("base_frame, map_frame, odom.topic and scan.topic must be set")
        if self.command.interface == "ackermann" and not (self.command.wheelbase > 0
                                                          and self.command.max_steering_angle > 0):
            raise ConfigError("command.wheelbase and command.max_steering_angle: an ackermann car needs both (> 0)")
        if self.collision.source == "topic" and not self.collision.topic:
            raise ConfigError("collision.topic: collision.source 'topic' needs a std_msgs/Bool topic")
        if self.collision.distance <= 0:
            raise ConfigError("collision.distance must be > 0")
        size, r, w = self.track.size, self.track.corner_radius, self.track.width
        if len(self.track.origin) != 3:
            raise ConfigError("track.origin: (x, y, yaw) of the track's centre in map_frame")
        if len(size) != 2 or min(size) < 2 * r or not 0 < w < 2 * r:
            raise ConfigError("track: size (x, y) >= 2 * corner_radius on both sides and 0 < width < 2 * "
                              "corner_radius")
