"""Parameters of the sim arm hardware node (``robot_rl_sim.ros_arm_node``): one dataclass, declared as ROS 2
parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

TASKS = ("Reach", "PickCube", "PegInsert")


@dataclass
class ArmHardwareConfig:
    """Parameters of the sim arm hardware node (all ROS 2 parameters)."""

    startup_only: ClassVar[tuple[str, ...]] = ("task", "seed", "image_size", "cameras", "physics_dt", "aux_rate_hz",
                                               "camera_rate_hz", "tf_rate_hz", "clock_rate_hz",
                                               "frame_prefix")
    """Read when the node starts (rates, scene, cameras): read-only parameters."""

    task: str = "PickCube"
    """Sim task whose scene and objects are simulated: Reach, PickCube or PegInsert."""
    seed: int = 0
    """Seed of the object placement (each ``~/reset`` draws the next placement)."""
    aux_rate_hz: float = 100.0
    """Rate of ee_pose, ee_twist, wrench, object_pose and success."""
    image_size: int = 0
    """Side of the square camera images (0 = no cameras)."""
    cameras: tuple[str, ...] = ("front", "wrist")
    """Cameras published as camera/<name>/image_raw."""
    camera_rate_hz: float = 20.0
    """Camera frame rate."""
    tf_rate_hz: float = 50.0
    """Rate of /tf (the moving links and the task object; /tf_static and robot_description are published once)."""
    clock_rate_hz: float = 250.0
    """Rate of ``/clock`` with ``use_sim_time`` (the resolution of the other nodes' time; stamps are exact)."""
    frame_prefix: str = ""
    """Prepended to every frame id this node publishes (several robots in one TF tree), e.g. ``arm1/``."""
    command_latency: float = 0.0
    """Injected delay (s) before an arriving command takes effect."""
    state_latency: float = 0.0
    """Injected delay (s) before an outgoing message is published."""
    joint_noise: float = 0.0
    """Std of Gaussian noise on published joint positions (rad) and velocities (rad/s)."""
    pose_noise: float = 0.0
    """Std of Gaussian noise on the published EE position (m)."""
    command_timeout: float = 0.1
    """Without an effort command for this long (s) the arm brakes (gravity compensation + damping)."""
    brake_damping: float = 5.0
    """Joint damping (N m s/rad) of the brake."""
    physics_dt: float = 0.0
    """Physics step and control period (s) of the hardware loop; 0 = the task model's own timestep (2 ms, as in
    pure sim). 0.001 runs it at 1 kHz, the rate of a Franka arm's torque interface."""
    reset_teleports_arm: bool = False
    """``~/reset`` also puts the arm back at home (sim convenience; a real arm is moved home by the controller)."""

    def validate(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}")
        if not 0 <= self.physics_dt <= 0.01:
            raise ValueError("physics_dt must be in [0, 0.01] s (0 = the model's timestep)")
        if min(self.aux_rate_hz, self.camera_rate_hz, self.tf_rate_hz, self.clock_rate_hz, self.command_timeout) <= 0:
            raise ValueError("rates and command_timeout must be > 0")
        if min(self.command_latency, self.state_latency, self.joint_noise, self.pose_noise, self.image_size) < 0:
            raise ValueError("latencies, noise and image_size must be >= 0")
