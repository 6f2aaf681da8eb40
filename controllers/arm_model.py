"""MJCF of a 7-DoF Panda-like arm built from primitives (no meshes), with a parallel gripper, a table, lights,
cameras and optional task objects. Everything is generated as a string by :func:`build_arm_xml`.

Frames: the world origin is the robot base on the table top (z = 0 is the table surface, +x points away from
the robot). Link lengths and joint limits follow the Franka Panda (DH: d1 0.333, d3 0.316, a3 0.0825,
d5 0.384, a6 0.088, flange 0.107, TCP 0.1034 below the hand). Joints are hinges with armature and damping,
driven by ``motor`` actuators (joint torques, the impedance law's output). The gripper is two slide fingers
(0-4 cm each, 8 cm total opening) with position actuators that share one command (grip force up to 40 N per
finger). Objects: a 4 cm 50 g cube, an 80 g 2x2x8 cm peg and a square-hole fixture (4 boxes, 3 cm deep).

Physics: 2 ms timestep (the impedance law runs every step at 500 Hz), implicitfast integrator, elliptic friction
cones with impratio 10 and condim 4 (torsional friction) on fingers and objects, for stable grasps.
"""

from __future__ import annotations

import numpy as np

TIMESTEP = 0.002
ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_left", "finger_right")
ARM_ACTUATORS = tuple(f"tau{i}" for i in range(1, 8))
FINGER_ACTUATORS = ("grip_left", "grip_right")
EE_SITE = "ee"
FT_SITE = "ft"
FINGER_MAX = 0.04
"""Travel of each finger (m); the gripper opening is the sum of both."""
JOINT_LIMITS = ((-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698),
                (-2.8973, 2.8973), (-0.0175, 3.7525), (-2.8973, 2.8973))
TORQUE_LIMITS = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
HOME_QPOS = np.array([0.0, 0.0, 0.0, -2.2, 0.0, 2.2, np.pi / 4])
"""Home posture: the hand points straight down with the fingers opening along the world y axis."""
CUBE_HALF = 0.02
PEG_HALF = (0.01, 0.01, 0.04)
"""Peg half sizes (square 2 cm cross-section, 8 cm long)."""
HOLE_DEPTH = 0.03
HOLE_WALL = 0.02


def lookat_xyaxes(pos, target, up=(0.0, 0.0, 1.0)) -> str:
    """MJCF ``xyaxes`` of a camera at ``pos`` looking at ``target`` (cameras look along their -z)."""
    f = np.asarray(target, float) - np.asarray(pos, float)
    f /= np.linalg.norm(f)
    right = np.cross(f, up)
    right /= np.linalg.norm(right)
    cam_up = np.cross(right, f)
    return " ".join(f"{v:.5f}" for v in (*right, *cam_up))


FRONT_POS = (1.0, 0.3, 0.45)
WRIST_XYAXES = lookat_xyaxes((0.055, 0.0, 0.05), (0.0, 0.0, 0.2), up=(1.0, 0.0, 0.0))


def _v(*xs: float) -> str:
    return " ".join(f"{x:.5g}" for x in xs)


def _arm() -> str:
    lim = [f'range="{lo} {hi}"' for lo, hi in JOINT_LIMITS]
    return f"""
    <body name="link0">
      <geom class="viz" type="cylinder" size="0.07 0.07" pos="0 0 0.07" rgba="0.3 0.3 0.3 1" mass="0.63"/>
      <geom class="viz" type="capsule" fromto="0 0 0.14 0 0 0.24" size="0.06" mass="0"/>
      <body name="link1" pos="0 0 0.333">
        <joint name="joint1" class="arm" {lim[0]}/>
        <geom class="viz" type="capsule" fromto="0 0 -0.09 0 0 0.0" size="0.06" mass="4.97"/>
        <body name="link2" quat="1 -1 0 0">
          <joint name="joint2" class="arm" {lim[1]}/>
          <geom class="viz" type="capsule" fromto="0 0 -0.06 0 0 0.06" size="0.06" mass="0.3"/>
          <geom class="viz" type="capsule" fromto="0 0 0 0 -0.2 0" size="0.055" mass="0.35"/>
          <body name="link3" pos="0 -0.316 0" quat="1 1 0 0">
            <joint name="joint3" class="arm" {lim[2]}/>
            <geom class="viz" type="capsule" fromto="0 0 -0.1 0 0 0" size="0.055" mass="2.5"/>
            <geom class="viz" type="capsule" fromto="0 0 0 0.0825 0 0" size="0.05" mass="0.73"/>
            <body name="link4" pos="0.0825 0 0" quat="1 1 0 0">
              <joint name="joint4" class="arm" {lim[3]}/>
              <geom class="viz" type="capsule" fromto="0 0 -0.05 0 0 0.05" size="0.055" mass="1.0"/>
              <geom class="viz" type="capsule" fromto="0 0 0 -0.0825 0.25 0" size="0.05" mass="2.59"/>
              <body name="link5" pos="-0.0825 0.384 0" quat="1 -1 0 0">
                <joint name="joint5" class="arm" {lim[4]}/>
                <geom class="viz" type="capsule" fromto="0 0 -0.14 0 0 0" size="0.045" mass="1.23"/>
                <body name="link6" quat="1 1 0 0">
                  <joint name="joint6" class="arm" {lim[5]}/>
                  <geom class="viz" type="capsule" fromto="0 0 -0.05 0 0 0.03" size="0.05" mass="1.0"/>
                  <geom class="viz" type="capsule" fromto="0 0 0 0.088 0 0" size="0.045" mass="0.67"/>
                  <body name="link7" pos="0.088 0 0" quat="1 1 0 0">
                    <joint name="joint7" class="arm" {lim[6]}/>
                    <geom class="viz" type="cylinder" fromto="0 0 -0.03 0 0 0.1" size="0.045" mass="0.74"
                          rgba="0.3 0.3 0.3 1"/>
{_hand()}
                  </body>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>"""


def _hand() -> str:
    finger = """<geom class="grip" type="box" size="0.011 0.005 0.02" pos="0 0.009 0.015" rgba="0.9 0.9 0.9 1"
                            mass="0.015"/>
                      <geom class="pad" type="box" size="0.011 0.004 0.012" pos="0 0.004 0.045"/>"""
    return f"""
                    <body name="hand" pos="0 0 0.107" quat="0.9238795 0 0 -0.3826834">
                      <site name="{FT_SITE}" size="0.005"/>
                      <site name="{EE_SITE}" pos="0 0 0.1034" size="0.006" rgba="1 0.5 0 0.6" group="3"/>
                      <geom class="grip" type="box" size="0.025 0.1 0.025" pos="0 0 0.033" mass="0.73"/>
                      <camera name="wrist" pos="0.055 0 0.05" xyaxes="{WRIST_XYAXES}" fovy="70"/>
                      <body name="finger_left" pos="0 0 0.0584">
                        <joint name="finger_left" class="finger"/>
                        {finger}
                      </body>
                      <body name="finger_right" pos="0 0 0.0584" quat="0 0 0 1">
                        <joint name="finger_right" class="finger"/>
                        {finger}
                      </body>
                    </body>"""


def _cube() -> str:
    h = CUBE_HALF
    return f"""
    <body name="cube" pos="0.5 0 {h}">
      <freejoint name="cube"/>
      <geom name="cube" class="object" type="box" size="{_v(h, h, h)}" mass="0.05" rgba="0.85 0.15 0.15 1"/>
    </body>"""


CUBE_COLORS = {"red": "0.85 0.15 0.15", "green": "0.15 0.7 0.2", "blue": "0.15 0.3 0.9"}
"""The PickColor cubes' names (``cube_<colour>``) and colours."""


def _colored_cubes() -> str:
    h = CUBE_HALF
    return "".join(f"""
    <body name="cube_{name}" pos="0.5 {0.1 * i - 0.1:g} {h}">
      <freejoint name="cube_{name}"/>
      <geom name="cube_{name}" class="object" type="box" size="{_v(h, h, h)}" mass="0.05" rgba="{rgb} 1"/>
    </body>""" for i, (name, rgb) in enumerate(CUBE_COLORS.items()))


def _peg_and_hole(clearance: float) -> str:
    px, py, pz = PEG_HALF
    w = px + clearance / 2  # half width of the square hole
    t, d = HOLE_WALL / 2, HOLE_DEPTH / 2
    walls = []
    for sx, sy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        if sx:
            pos, size = (sx * (w + t), 0, d), (t, w + 2 * t, d)
        else:
            pos, size = (0, sy * (w + t), d), (w, t, d)
        walls.append(f'<geom class="fixture" type="box" pos="{_v(*pos)}" size="{_v(*size)}"/>')
    return f"""
    <body name="hole" mocap="true" pos="0.55 0 0">
      {chr(10).join("      " + g for g in walls).strip()}
      <site name="hole" pos="0 0 {HOLE_DEPTH}" size="0.004" rgba="0 0 1 1" group="3"/>
    </body>
    <body name="peg" pos="0.55 0 0.2">
      <freejoint name="peg"/>
      <!-- 80 g; the inertia about the long axis is ~3x the solid box's: a thin box spun up by a hard pinch can
           otherwise gain hundreds of rad/s and blow up the 2 ms step -->
      <inertial pos="0 0 0" mass="0.08" diaginertia="4.5e-5 4.5e-5 1.5e-5"/>
      <geom name="peg" class="object" type="box" size="{_v(px, py, pz)}" friction="0.5 0.005 0.0001"
            rgba="0.95 0.65 0.1 1"/>
      <site name="peg_bottom" pos="0 0 {-pz}" size="0.003" group="3"/>
    </body>"""


def _target() -> str:
    return """
    <body name="target" mocap="true" pos="0.5 0 0.2">
      <site name="target" type="sphere" size="0.02" rgba="0.1 0.8 0.1 0.5"/>
    </body>"""


def build_arm_xml(objects: tuple[str, ...] = (), hole_clearance: float = 0.002) -> str:
    """MJCF of the arm scene. ``objects``: any of ``"cube"`` (4 cm free cube), ``"cubes"`` (a red, a green and a
    blue one: ``cube_<colour>``), ``"peg"`` (free 2x2x8 cm peg and a
    square hole fixture of 4 boxes, a mocap body, with ``hole_clearance`` total clearance in m), ``"target"``
    (a visual-only mocap sphere for Reach)."""
    unknown = set(objects) - {"cube", "cubes", "peg", "target"}
    if unknown:
        raise ValueError(f"unknown arm scene objects {sorted(unknown)}")
    tau = "\n".join(f'    <motor name="{a}" joint="{j}" ctrlrange="{-lim} {lim}"/>'
                    for a, j, lim in zip(ARM_ACTUATORS, ARM_JOINTS, TORQUE_LIMITS, strict=True))
    grip = "\n".join(f'    <position name="{a}" joint="{j}" ctrlrange="0 {FINGER_MAX}" kp="3000" kv="50" '
                     f'forcerange="-40 40"/>' for a, j in zip(FINGER_ACTUATORS, FINGER_JOINTS, strict=True))
    bodies = _arm()
    if "cube" in objects:
        bodies += _cube()
    if "cubes" in objects:
        bodies += _colored_cubes()
    if "peg" in objects:
        bodies += _peg_and_hole(hole_clearance)
    if "target" in objects:
        bodies += _target()
    front = lookat_xyaxes(FRONT_POS, (0.47, 0.0, 0.1))
    return f"""<mujoco model="robot_rl_arm">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{TIMESTEP}" integrator="implicitfast" cone="elliptic" impratio="10"/>
  <visual>
    <global offwidth="256" offheight="256"/>
    <quality shadowsize="0"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.5 0.5 0.5" specular="0 0 0"/>
  </visual>
  <default>
    <geom solref="0.005 1" solimp="0.95 0.99 0.001"/>
    <default class="arm">
      <joint type="hinge" axis="0 0 1" armature="0.1" damping="1.0"/>
    </default>
    <default class="viz">
      <geom contype="0" conaffinity="0" rgba="0.92 0.92 0.95 1"/>
    </default>
    <default class="grip">
      <geom rgba="0.25 0.25 0.28 1" friction="1 0.005 0.0001"/>
    </default>
    <default class="pad">
      <geom condim="4" friction="1.5 0.02 0.0001" rgba="0.15 0.15 0.15 1" mass="0.01"/>
    </default>
    <default class="finger">
      <joint type="slide" axis="0 1 0" range="0 {FINGER_MAX}" armature="0.2" damping="5"/>
    </default>
    <default class="object">
      <geom condim="4" friction="1 0.005 0.0001"/>
    </default>
    <default class="fixture">
      <geom friction="0.3 0.005 0.0001" rgba="0.25 0.35 0.6 1"/>
    </default>
  </default>
  <worldbody>
    <light name="top" pos="0.5 0 1.6" dir="0 0 -1" directional="true" diffuse="0.6 0.6 0.6" castshadow="false"/>
    <light name="side" pos="1.2 -0.8 1.0" dir="-0.5 0.6 -0.6" diffuse="0.3 0.3 0.3" castshadow="false"/>
    <geom name="table" type="box" pos="0.45 0 -0.02" size="0.65 0.6 0.02" rgba="0.55 0.45 0.35 1"
          friction="0.8 0.005 0.0001"/>
    <camera name="front" pos="{_v(*FRONT_POS)}" xyaxes="{front}" fovy="45"/>
{bodies}
  </worldbody>
  <contact>
    <exclude body1="finger_left" body2="finger_right"/>
  </contact>
  <sensor>
    <force name="ft_force" site="{FT_SITE}"/>
    <torque name="ft_torque" site="{FT_SITE}"/>
  </sensor>
  <actuator>
{tau}
{grip}
  </actuator>
</mujoco>
"""
