"""Track geometry and MJCF of the driving task: a differential-drive car built from primitives on a closed
rounded-rectangle track bounded by walls. Everything is generated as a string by :func:`build_drive_xml`.

Track: the centreline is a rounded rectangle of outer size ``size`` (x, y) with corner radius ``corner_radius``,
centred at the world origin and driven counter-clockwise; arc length ``s = 0`` is the middle of the bottom
straight (heading +x). Walls (group 1, 25 cm high, on the static body ``walls``) run at ``±width / 2`` from the
centreline: ~0.6 m boxes along the straights and chord boxes along the arcs, in alternating colours; the contact
sensor ``wall_contact`` counts the car's contacts with them. Checkpoint markers are visual-only stripes across the
track (the one at s = 0 green).

Car (a 1/10-scale robot car): 0.40 x 0.20 m chassis (2.5 kg) on a free joint, two 5 cm drive wheels on the
axle through the centre (track width 0.30 m, so it turns about its centre) driven by velocity actuators with a
torque limit, and two frictionless ball casters front and rear (condim 1, priority over the floor). A forward
camera ``front`` sits on the chassis nose, pitched 15 degrees down; a world camera ``top`` shows the whole track.

Physics: 5 ms timestep, implicitfast integrator (the stiff wheel velocity servos are integrated implicitly).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from robot_rl.robots.track import TrackMap
from robot_rl_controllers.arm_model import lookat_xyaxes

TIMESTEP = 0.005
WHEEL_RADIUS = 0.05
WHEEL_TRACK = 0.30
"""Distance between the drive wheels' contact points (m)."""
WALL_HEIGHT = 0.25
WALL_THICKNESS = 0.05
LIDAR_HEIGHT = 0.08
"""Height above the chassis origin (the axle) of the point the range rays start from (m)."""
WHEEL_JOINTS = ("wheel_left", "wheel_right")


class Track(TrackMap):
    """The track map (:class:`robot_rl.robots.track.TrackMap`) plus its wall layout for the MJCF."""

    def wall_boxes(self) -> list[tuple[np.ndarray, float, float]]:
        """(centre xy, yaw, half length) of every wall box, inner and outer walls."""
        boxes = []
        off = self.width / 2 + WALL_THICKNESS / 2
        for kind, params, length in self.segments:
            if kind == "line":
                p0, p1 = params
                t = (p1 - p0) / length
                normal = np.array([-t[1], t[0]])
                yaw = math.atan2(t[1], t[0])
                n = max(1, int(math.ceil(length / 0.6)))  # ~0.6 m pieces: alternating colours show motion
                for side in (1.0, -1.0):
                    for j in range(n):
                        mid = p0 + (j + 0.5) / n * (p1 - p0) + side * off * normal
                        boxes.append((mid, yaw, length / (2 * n) + WALL_THICKNESS / 2))
                continue
            centre, theta0 = params
            n = max(2, int(math.ceil((math.pi / 2) / (math.pi / 24))))
            dtheta = (math.pi / 2) / n
            for radius in (self.corner_radius - off, self.corner_radius + off):
                half = radius * math.sin(dtheta / 2) + WALL_THICKNESS / 2  # chord / 2, overlapping the next box
                for j in range(n):
                    theta = theta0 + (j + 0.5) * dtheta
                    mid = centre + radius * math.cos(dtheta / 2) * np.array([math.cos(theta), math.sin(theta)])
                    boxes.append((mid, theta + math.pi / 2, half))
        return boxes


def set_floor_grip(model: mujoco.MjModel, friction: float) -> None:
    """The drive wheels' sliding friction on the floor set to ``friction`` (a contact pair's friction is the larger
    of its two geoms': both are set)."""
    bodies = {int(model.jnt_bodyid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)]) for j in WHEEL_JOINTS}
    wheels = [i for i in range(model.ngeom) if int(model.geom_bodyid[i]) in bodies and model.geom_contype[i]]
    model.geom_friction[[*wheels, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")], 0] = friction


def _v(*xs: float) -> str:
    return " ".join(f"{x:.6g}" for x in xs)


def _quat_z(yaw: float) -> str:
    return _v(math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def _car() -> str:
    cam = _v(0.19, 0.0, 0.12)
    cam_axes = lookat_xyaxes((0.19, 0.0, 0.12), (1.19, 0.0, 0.12 - math.tan(math.radians(15))))
    wheels = "".join(f"""
      <body name="{name}" pos="0 {side * WHEEL_TRACK / 2:.4f} 0">
        <joint name="{name}" type="hinge" axis="0 1 0" damping="0.002" armature="0.0005"/>
        <geom name="{name}" class="wheel" type="cylinder" size="{WHEEL_RADIUS} 0.02" zaxis="0 1 0"/>
        <geom class="deco" type="box" size="0.035 0.021 0.006" zaxis="0 1 0" rgba="0.8 0.8 0.8 1"/>
      </body>""" for name, side in zip(WHEEL_JOINTS, (1.0, -1.0)))
    return f"""
    <body name="car" pos="0 0 {WHEEL_RADIUS}">
      <freejoint name="car"/>
      <geom name="chassis" type="box" size="0.2 0.1 0.03" pos="0 0 0.03" mass="2.5" rgba="0.15 0.35 0.85 1"/>
      <geom class="deco" type="box" size="0.06 0.07 0.025" pos="-0.05 0 0.085" rgba="0.1 0.1 0.12 1"/>
      <geom name="caster_front" class="caster" pos="0.15 0 -0.025"/>
      <geom name="caster_rear" class="caster" pos="-0.15 0 -0.025"/>
      <site name="lidar" pos="0 0 {LIDAR_HEIGHT}" size="0.01"/>
      <camera name="front" pos="{cam}" xyaxes="{cam_axes}" fovy="75"/>{wheels}
    </body>"""


def build_drive_xml(track: Track, n_checkpoints: int, wheel_torque: float, max_wheel_speed: float) -> str:
    """The MJCF of the driving task on ``track`` with ``n_checkpoints`` markers (at ``s = k L / n``)."""
    walls = []
    for i, (xy, yaw, half) in enumerate(track.wall_boxes()):
        rgba = "0.85 0.15 0.1 1" if i % 2 else "0.92 0.92 0.92 1"  # kerb stripes: visual cues for the camera
        walls.append(f'<geom name="wall{i}" class="wall" size="{half:.5f} {WALL_THICKNESS / 2} {WALL_HEIGHT / 2}" '
                     f'pos="{_v(xy[0], xy[1], WALL_HEIGHT / 2)}" quat="{_quat_z(yaw)}" rgba="{rgba}"/>')
    markers = []
    for k in range(n_checkpoints):
        xy, yaw = track.pose(k * track.length / n_checkpoints)
        rgba = "0.1 0.8 0.2 1" if k == 0 else "0.95 0.8 0.1 1"
        markers.append(f'<geom name="checkpoint{k}" class="marker" size="0.03 {track.width / 2} 0.001" '
                       f'pos="{_v(xy[0], xy[1], 0.001)}" quat="{_quat_z(yaw)}" rgba="{rgba}"/>')
    sep = "\n    "
    # a finite floor renders far faster than an infinite plane (software GL); 1.5 m beyond the outer walls
    floor = [float(np.max(np.abs(track.points[:, k]))) + track.width / 2 + 1.5 for k in (0, 1)]
    return f"""<mujoco model="drive">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{TIMESTEP}" integrator="implicitfast"/>
  <visual>
    <global offwidth="256" offheight="256"/>
    <quality offsamples="0"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.4 0.4 0.4" specular="0 0 0"/>
  </visual>
  <asset>
    <texture name="floor" type="2d" builtin="checker" rgb1="0.42 0.44 0.46" rgb2="0.36 0.38 0.40"
             width="64" height="64"/>
    <material name="floor" texture="floor" texrepeat="{floor[0] / 0.5:.0f} {floor[1] / 0.5:.0f}"/>
  </asset>
  <default>
    <geom friction="1.0 0.005 0.0001"/>
    <default class="wheel">
      <geom mass="0.15" rgba="0.08 0.08 0.08 1" group="2"/>
    </default>
    <default class="caster">
      <geom type="sphere" size="0.025" mass="0.02" condim="1" priority="1" rgba="0.5 0.5 0.5 1" group="2"/>
    </default>
    <default class="deco">
      <geom contype="0" conaffinity="0" mass="0" group="2"/>
    </default>
    <default class="wall">
      <geom type="box" group="1" friction="0.5 0.005 0.0001"/>
    </default>
    <default class="marker">
      <geom type="box" contype="0" conaffinity="0" group="0"/>
    </default>
  </default>
  <worldbody>
    <light name="sun" pos="0 0 6" dir="0 0 -1" directional="true" diffuse="0.55 0.55 0.55" castshadow="false"/>
    <light name="side" pos="4 -4 3" dir="-0.6 0.6 -0.5" diffuse="0.25 0.25 0.25" castshadow="false"/>
    <camera name="top" pos="0 0 7" xyaxes="1 0 0 0 1 0" fovy="60"/>
    <geom name="floor" type="plane" size="{_v(*floor)} 1" material="floor"/>
    <body name="walls">
      {(sep + "  ").join(walls)}
    </body>
    {sep.join(markers)}
    {_car()}
  </worldbody>
  <actuator>
    <velocity name="wheel_left" joint="wheel_left" kv="2" forcerange="{-wheel_torque} {wheel_torque}"
              ctrlrange="{-max_wheel_speed} {max_wheel_speed}"/>
    <velocity name="wheel_right" joint="wheel_right" kv="2" forcerange="{-wheel_torque} {wheel_torque}"
              ctrlrange="{-max_wheel_speed} {max_wheel_speed}"/>
  </actuator>
  <sensor>
    <contact name="wall_contact" subtree1="car" body2="walls" data="found"/>
  </sensor>
</mujoco>
"""
