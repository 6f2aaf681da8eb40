"""TF frames and the URDF robot description of a MuJoCo model, for the sim hardware nodes: what a real robot's
``robot_state_publisher`` provides, so RViz shows the robot and its camera frames out of the box.

A :class:`MujocoFrames` takes a subtree of bodies (the robot; free bodies such as a task's cube are objects, not
links), plus fixed frames on them (sites such as the EE point, and cameras). Every body is a link named after it;
the root's parent is ``root_frame``. A body without joints hangs on its parent by a fixed joint, so its transform
is static (``/tf_static``); one with a hinge or slide joint moves (``/tf``, computed from the simulation state, so
it agrees with every other message of the same physics step). A camera gets an optical frame
``<camera>_camera_optical`` (REP-103: z forward, x right, y down; MuJoCo's camera looks along −z with y up), which
the images' ``header.frame_id`` names. The URDF lists the same links and joints, with the geometry of primitive
geoms as visuals.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.robots.transforms import compose, invert, quat_mul

OPTICAL = np.array([0.0, 1.0, 0.0, 0.0])
"""Rotation of π about x (w, x, y, z): MuJoCo camera frame -> REP-103 optical frame."""
JOINT_VELOCITY_LIMIT = 2.5
"""rad/s (m/s for slides) written into the URDF's joint limits: MuJoCo models carry none, URDF requires one."""


def relative_pose(parent_pos: np.ndarray, parent_quat: np.ndarray, child_pos: np.ndarray,
                  child_quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The child's pose in the parent's frame, from both poses in a common frame."""
    parent = (np.asarray(parent_pos, np.float64), np.asarray(parent_quat, np.float64))
    return compose(invert(parent), (np.asarray(child_pos, np.float64), np.asarray(child_quat, np.float64)))


def rpy(quat: np.ndarray) -> tuple[float, float, float]:
    """URDF's roll-pitch-yaw (fixed axes x, y, z) of a unit quaternion (w, x, y, z)."""
    m = np.empty(9)
    mujoco.mju_quat2Mat(m, np.asarray(quat, np.float64))
    r = m.reshape(3, 3)
    cos_pitch = math.hypot(r[0, 0], r[1, 0])
    pitch = math.atan2(-r[2, 0], cos_pitch)  # accurate near +-pi/2, where asin is not
    if cos_pitch > 1e-9:
        return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])
    return 0.0, pitch, math.atan2(-r[0, 1], r[1, 1])  # gimbal lock: yaw carries the rotation about z


def _numbers(values) -> str:  # noqa: ANN001
    return " ".join(f"{float(v) + 0.0:.10g}" for v in values)  # + 0.0: no "-0"


@dataclass(frozen=True)
class FixedFrame:
    """A frame fixed to a link: ``pos``/``quat`` in the link's frame."""

    name: str
    parent: str
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]


class MujocoFrames:
    """Links, joints and fixed frames of the bodies under ``root_body`` of ``model`` (see the module docstring).
    ``sites`` and ``cameras`` name MuJoCo sites and cameras that get frames of their own (sites under their own
    name, cameras as ``<name>_camera_optical``); ``rename`` maps body and site names to frame names and
    ``joint_rename`` MuJoCo joint names to URDF joint names (a driver's names, in a driver emulation); the bodies of
    ``locked`` joints are fixed links at joint position 0 (an emulation with fewer joints than the model).
    ``move_root``: the root body is a free body that moves in ``root_frame`` (the car in ``odom``); ``root_frame``
    is then outside the description, whose root link is the root body."""

    def __init__(self, model: mujoco.MjModel, root_body: str, root_frame: str, sites: tuple[str, ...] = (),
                 cameras: tuple[str, ...] = (), move_root: bool = False,
                 rename: dict[str, str] | None = None, joint_rename: dict[str, str] | None = None,
                 locked: tuple[str, ...] = ()) -> None:
        self.model, self.root_frame = model, root_frame
        self.joint_rename = dict(joint_rename or {})
        self.names_of_sites = {k: v for k, v in (rename or {}).items()
                               if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, k) >= 0}
        root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, root_body)
        if root < 0:
            raise ValueError(f"no body {root_body!r} in the model")
        self.bodies = [b for b in range(model.nbody) if self._under(b, root)]
        self.names = {b: (rename or {}).get(model.body(b).name, model.body(b).name) for b in self.bodies}
        self.root, self.move_root = root, move_root
        locked_bodies = {int(model.jnt_bodyid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)]) for j in locked}
        self.moving = [b for b in self.bodies if b != root and model.body_jntnum[b] > 0 and b not in locked_bodies]
        for b in self.moving:  # what a URDF joint can say: one hinge or slide through the body's origin
            j = int(model.body_jntadr[b])
            if (model.body_jntnum[b] != 1 or np.any(model.jnt_pos[j] != 0)
                    or int(model.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                                      int(mujoco.mjtJoint.mjJNT_SLIDE))):
                raise ValueError(f"body {model.body(b).name!r}: only one hinge or slide joint at the body origin "
                                 "can be described")
        self.fixed: list[FixedFrame] = []
        for b in self.bodies:
            if b != root and (model.body_jntnum[b] == 0 or b in locked_bodies):
                self.fixed.append(FixedFrame(self.names[b], self._parent_name(b), tuple(model.body_pos[b]),
                                             tuple(model.body_quat[b])))
        if root != 0 and not move_root:
            self.fixed.insert(0, FixedFrame(self.names[root], root_frame, tuple(model.body_pos[root]),
                                            tuple(model.body_quat[root])))
        for s in sites:
            sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, s)
            self.fixed.append(FixedFrame(self.names_of_sites.get(s, s), self._frame_of(int(model.site_bodyid[sid])),
                                         tuple(model.site_pos[sid]),
                                         tuple(model.site_quat[sid])))
        for c in cameras:
            cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, c)
            self.fixed.append(FixedFrame(f"{c}_camera_optical", self._frame_of(int(model.cam_bodyid[cid])),
                                         tuple(model.cam_pos[cid]), tuple(quat_mul(model.cam_quat[cid], OPTICAL))))

    def _under(self, body: int, root: int) -> bool:
        while True:
            if body == root:
                return True
            if body == 0:
                return False
            body = int(self.model.body_parentid[body])

    def _frame_of(self, body: int) -> str:
        if body == 0 or body not in self.names:
            return self.root_frame
        return self.names[body]

    def _parent_name(self, body: int) -> str:
        return self._frame_of(int(self.model.body_parentid[body]))

    @property
    def links(self) -> list[str]:
        """Every link of the description: the root frame (unless the root moves in it), one link per body, the site
        and camera frames."""
        own = [*self.names.values(), *(f.name for f in self.fixed if f.name not in self.names.values())]
        return own if self.move_root else [self.root_frame, *own]

    def moving_transforms(self, data: mujoco.MjData, root_pose: tuple[np.ndarray, np.ndarray] | None = None
                          ) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        """``(parent, child, pos, quat)`` of every moving link (and the root, if it moves: at ``root_pose`` when
        given, e.g. the odometry as published, else where the simulation has it) in the state of ``data``
        (forward kinematics must be current: after ``mj_step``/``mj_forward``)."""
        out = []
        if self.move_root:
            pos, quat = root_pose if root_pose is not None else (data.xpos[self.root], data.xquat[self.root])
            out.append((self.root_frame, self.names[self.root], np.array(pos), np.array(quat)))
        for b in self.moving:
            p = int(self.model.body_parentid[b])
            pos, quat = relative_pose(data.xpos[p], data.xquat[p], data.xpos[b], data.xquat[b])
            out.append((self._parent_name(b), self.names[b], pos, quat))
        return out

    def static_transforms(self) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        return [(f.parent, f.name, np.asarray(f.pos), np.asarray(f.quat)) for f in self.fixed]

    def urdf(self, robot: str) -> str:
        """The URDF of the links, joints and fixed frames (visuals: the bodies' primitive geoms)."""
        m = self.model
        top = ET.Element("robot", name=robot)
        for name in self.links:
            link = ET.SubElement(top, "link", name=name)
            body = next((b for b, n in self.names.items() if n == name), None)
            if body is not None:
                self._visuals(link, body)
        for b in self.moving:
            jid = int(m.body_jntadr[b])
            hinge = int(m.jnt_type[jid]) == int(mujoco.mjtJoint.mjJNT_HINGE)
            limited = bool(m.jnt_limited[jid])
            urdf_type = ("revolute" if limited else "continuous") if hinge else "prismatic"
            name = m.joint(jid).name
            joint = ET.SubElement(top, "joint", name=self.joint_rename.get(name, name), type=urdf_type)
            self._origin(joint, m.body_pos[b], m.body_quat[b])
            ET.SubElement(joint, "parent", link=self._parent_name(b))
            ET.SubElement(joint, "child", link=self.names[b])
            ET.SubElement(joint, "axis", xyz=_numbers(m.jnt_axis[jid]))
            if urdf_type != "continuous":  # URDF requires limits on revolute and prismatic joints only
                low, high = m.jnt_range[jid]
                ET.SubElement(joint, "limit", lower=_numbers([low]), upper=_numbers([high]),
                              effort=_numbers([self._effort(jid)]), velocity=_numbers([JOINT_VELOCITY_LIMIT]))
        for f in self.fixed:
            joint = ET.SubElement(top, "joint", name=f"{f.parent}_to_{f.name}", type="fixed")
            self._origin(joint, np.asarray(f.pos), np.asarray(f.quat))
            ET.SubElement(joint, "parent", link=f.parent)
            ET.SubElement(joint, "child", link=f.name)
        ET.indent(top)
        return '<?xml version="1.0"?>\n' + ET.tostring(top, encoding="unicode") + "\n"

    def _effort(self, joint: int) -> float:
        """The largest force of an actuator on ``joint`` (0 when none drives it)."""
        m, best = self.model, 0.0
        for a in range(m.nu):
            if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and m.actuator_trnid[a, 0] == joint:
                lims = m.actuator_forcerange[a] if m.actuator_forcelimited[a] else m.actuator_ctrlrange[a]
                best = max(best, float(np.max(np.abs(lims))))
        return best

    @staticmethod
    def _origin(parent: ET.Element, pos: np.ndarray, quat: np.ndarray) -> None:
        ET.SubElement(parent, "origin", xyz=_numbers(pos), rpy=_numbers(rpy(quat)))

    def _visuals(self, link: ET.Element, body: int) -> None:
        m = self.model
        for g in range(int(m.body_geomadr[body]), int(m.body_geomadr[body]) + int(m.body_geomnum[body])):
            kind, size = int(m.geom_type[g]), m.geom_size[g]
            if kind == mujoco.mjtGeom.mjGEOM_BOX:
                shape = ("box", {"size": _numbers(2 * size)})
            elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
                shape = ("sphere", {"radius": _numbers(size[:1])})
            elif kind in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):  # a capsule as its cylinder
                shape = ("cylinder", {"radius": _numbers(size[:1]), "length": _numbers([2 * size[1]])})
            else:
                continue
            visual = ET.SubElement(link, "visual")
            self._origin(visual, m.geom_pos[g], m.geom_quat[g])
            ET.SubElement(ET.SubElement(visual, "geometry"), shape[0], **shape[1])


class TfPublisher:
    """Publishes a :class:`MujocoFrames` description from a node: ``/tf_static`` and ``robot_description`` (both
    latched: transient local, as robot_state_publisher does) once, and ``/tf`` on every :meth:`publish` call.
    ``prefix`` is prepended to every frame id (several robots in one TF tree). Without the tf2_msgs interface
    (``scripts/build_tf2_msgs.sh``) it warns once and publishes only the description."""

    def __init__(self, node, frames: MujocoFrames, robot: str, prefix: str = "",  # noqa: ANN001
                 extra_static: list[tuple[str, str, np.ndarray, np.ndarray]] = ()) -> None:
        """``extra_static``: ``(parent, child, pos, quat)`` mounts outside the description (a driver's sensor frame)
        published on ``/tf_static`` with it."""
        # optional: ros2
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import String

        self.frames, self.prefix = frames, prefix
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_publisher(String, "robot_description", latched).publish(String(data=frames.urdf(robot)))
        try:
            from tf2_msgs.msg import TFMessage  # optional: ros2 (interfaces from scripts/build_ros_msgs.sh)
        except ImportError:
            node.get_logger().warning("tf2_msgs is not installed (scripts/build_tf2_msgs.sh builds it): no /tf, "
                                      "/tf_static")
            self.pub = None
            return
        from geometry_msgs.msg import TransformStamped  # optional: ros2

        self._msg_types = TFMessage, TransformStamped
        self.pub = node.create_publisher(TFMessage, "/tf", 10)
        self.pub_static = node.create_publisher(TFMessage, "/tf_static", latched)
        self.pub_static.publish(self.message([*frames.static_transforms(), *extra_static],
                                             node.get_clock().now().to_msg()))

    def message(self, transforms: list[tuple[str, str, np.ndarray, np.ndarray]], stamp: object) -> object:
        """A TFMessage of ``(parent, child, pos, quat)`` transforms at ``stamp`` (builtin_interfaces/Time)."""
        tf_message, transform_stamped = self._msg_types
        out = []
        for parent, child, pos, quat in transforms:
            t = transform_stamped()
            if stamp is not None:
                t.header.stamp = stamp
            t.header.frame_id, t.child_frame_id = self.prefix + parent, self.prefix + child
            v, r = t.transform.translation, t.transform.rotation
            v.x, v.y, v.z = (float(x) for x in pos)
            r.w, r.x, r.y, r.z = (float(x) for x in quat)
            out.append(t)
        return tf_message(transforms=out)

    def moving(self, data: mujoco.MjData, stamp: object, extra: list[tuple[str, str, np.ndarray, np.ndarray]] = (),
               root_pose: tuple[np.ndarray, np.ndarray] | None = None) -> object | None:
        """The ``/tf`` message of the moving links in the state of ``data`` (kinematics current) plus ``extra``
        transforms (None without tf2_msgs); publish it on ``pub``."""
        if self.pub is None:
            return None
        return self.message([*self.frames.moving_transforms(data, root_pose), *extra], stamp)


def camera_intrinsics(model: mujoco.MjModel, camera: str, width: int, height: int) -> np.ndarray:
    """The 3x3 pinhole matrix K of a MuJoCo camera rendered at ``width`` x ``height``: MuJoCo's ``fovy`` is the
    vertical field of view, pixels are square and the principal point is the image centre."""
    cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cid < 0:
        raise ValueError(f"no camera {camera!r} in the model")
    f = 0.5 * height / math.tan(math.radians(float(model.cam_fovy[cid])) / 2)
    return np.array([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def camera_info(model: mujoco.MjModel, camera: str, width: int, height: int, frame: str) -> object:
    """``sensor_msgs/CameraInfo`` of a MuJoCo camera (no distortion: ``plumb_bob`` with zero coefficients), as a
    camera driver publishes it beside every image; the caller sets ``header.stamp`` to the image's."""
    from sensor_msgs.msg import CameraInfo  # optional: ros2

    k = camera_intrinsics(model, camera, width, height)
    msg = CameraInfo(width=int(width), height=int(height), distortion_model="plumb_bob", d=[0.0] * 5)
    msg.header.frame_id = frame
    msg.k = k.ravel().tolist()
    msg.r = np.eye(3).ravel().tolist()
    msg.p = np.hstack([k, np.zeros((3, 1))]).ravel().tolist()
    return msg
