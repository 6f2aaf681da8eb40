"""Kinematics of a robot from its URDF (what a driver publishes on ``/robot_description``), through Pinocchio.

A real driver gives joint positions and velocities; the policy acts and observes in Cartesian space. This module
turns one into the other: the tool frame's pose (forward kinematics), its twist (the Jacobian times the joint
velocities) and joint positions for a target pose (inverse kinematics: damped least squares on Pinocchio's
Jacobian, started from the measured joints and kept inside the URDF's joint limits).

Only the arm's joints move in these computations; every other joint of the URDF (fingers, a mobile base) is held
at the position last given (:meth:`UrdfKinematics.set_joints`). Pinocchio (the ``pin`` wheels, extra
``robots``) is imported here only, on first use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _quat_wxyz(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation matrix."""
    import pinocchio as pin  # optional: robots

    q = pin.Quaternion(rotation)  # coeffs() is (x, y, z, w)
    x, y, z, w = q.coeffs()
    return np.array([w, x, y, z])


def _rotation(quat_wxyz: np.ndarray) -> np.ndarray:
    import pinocchio as pin  # optional: robots

    w, x, y, z = (float(v) for v in quat_wxyz)
    return pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()


@dataclass
class IkResult:
    """Joint positions found for a target pose, and how far their tool pose is from it."""

    q: np.ndarray
    """Arm joint positions (rad / m), in the order of :attr:`UrdfKinematics.joints`."""
    position_error: float
    """|target - reached| position (m)."""
    rotation_error: float
    """Angle (rad) between the target and the reached orientation."""
    iterations: int


class UrdfKinematics:
    """Forward, differential and inverse kinematics of ``tool_frame`` relative to ``base_frame`` for the arm
    joints ``joints`` of a URDF (see the module docstring). Raises ``ValueError`` naming what the URDF lacks."""

    def __init__(self, urdf: str, joints: tuple[str, ...] | list[str], base_frame: str, tool_frame: str) -> None:
        import pinocchio as pin  # optional: robots

        self._pin = pin
        try:
            self.model = pin.buildModelFromXML(urdf)
        except Exception as exc:  # noqa: BLE001  (pinocchio raises plain RuntimeError/ValueError on bad XML)
            raise ValueError(f"the robot description is not a URDF Pinocchio can read: {exc}") from None
        self.data = self.model.createData()
        names = list(self.model.names)
        missing = [j for j in joints if j not in names]
        if missing:
            raise ValueError(f"joints {missing} are not in the URDF (its joints: {names[1:]})")
        for frame in (base_frame, tool_frame):
            if not self.model.existFrame(frame):
                known = sorted({f.name for f in self.model.frames} - {"universe"})
                raise ValueError(f"frame {frame!r} is not in the URDF (its frames: {known})")
        self.joints = tuple(joints)
        self.base_id = self.model.getFrameId(base_frame)
        self.tool_id = self.model.getFrameId(tool_frame)
        ids = [self.model.getJointId(j) for j in joints]
        for j, jid in zip(joints, ids, strict=True):
            if self.model.joints[jid].nq != 1:
                raise ValueError(f"joint {j!r} is not a revolute or prismatic joint (nq={self.model.joints[jid].nq})")
        self.q_index = np.array([self.model.joints[i].idx_q for i in ids])
        self.v_index = np.array([self.model.joints[i].idx_v for i in ids])
        self.lower = self.model.lowerPositionLimit[self.q_index].copy()
        self.upper = self.model.upperPositionLimit[self.q_index].copy()
        self.q = pin.neutral(self.model)

    # ------------------------------------------------------------------ state
    def set_joints(self, positions: dict[str, float]) -> None:
        """Positions of any URDF joints by name (fingers etc. change the tool frame only if it hangs on them)."""
        for name, value in positions.items():
            if self.model.existJointName(name):
                jid = self.model.getJointId(name)
                if self.model.joints[jid].nq == 1:
                    self.q[self.model.joints[jid].idx_q] = value

    def _full(self, arm_q: np.ndarray) -> np.ndarray:
        q = self.q.copy()
        q[self.q_index] = arm_q
        return q

    def _frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position, rotation) of the tool in the base frame."""
        pin = self._pin
        pin.framesForwardKinematics(self.model, self.data, q)
        base, tool = self.data.oMf[self.base_id], self.data.oMf[self.tool_id]
        rel = base.actInv(tool)
        return rel.translation.copy(), rel.rotation.copy()

    # ------------------------------------------------------------------ kinematics
    def forward(self, arm_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tool pose in the base frame: (position [3], quaternion w-x-y-z [4])."""
        pos, rot = self._frames(self._full(np.asarray(arm_q, np.float64)))
        return pos, _quat_wxyz(rot)

    def jacobian(self, arm_q: np.ndarray) -> np.ndarray:
        """``[6, n]``: (linear; angular) velocity of the tool, expressed in the base frame, per arm joint velocity."""
        pin = self._pin
        pin.computeJointJacobians(self.model, self.data, self._full(np.asarray(arm_q, np.float64)))
        pin.updateFramePlacements(self.model, self.data)
        jac = pin.getFrameJacobian(self.model, self.data, self.tool_id, pin.LOCAL_WORLD_ALIGNED)
        base_rot = self.data.oMf[self.base_id].rotation
        out = jac[:, self.v_index]
        return np.vstack([base_rot.T @ out[:3], base_rot.T @ out[3:]])

    def twist(self, arm_q: np.ndarray, arm_qd: np.ndarray) -> np.ndarray:
        """Tool twist ``[6]`` (linear m/s; angular rad/s) in the base frame from joint positions and velocities."""
        return self.jacobian(arm_q) @ np.asarray(arm_qd, np.float64)

    def inverse(self, pos: np.ndarray, quat: np.ndarray, seed: np.ndarray, iterations: int = 50,
                tolerance: float = 1e-4, damping: float = 1e-3, max_joint_step: float = 0.2,
                rotation_weight: float = 0.5) -> IkResult:
        """Joint positions whose tool pose is ``pos``/``quat`` (base frame), by damped least squares from ``seed``
        (the measured joints: the solution stays on the arm's current branch), each iteration's joint change
        capped at ``max_joint_step`` and the result kept inside the URDF limits. ``rotation_weight`` scales the
        orientation error against the position error (m per rad)."""
        pin = self._pin
        target_rot = _rotation(quat)
        target_pos = np.asarray(pos, np.float64)
        q_arm = np.clip(np.asarray(seed, np.float64), self.lower, self.upper)
        weights = np.array([1.0, 1.0, 1.0, rotation_weight, rotation_weight, rotation_weight])
        err_pos = err_rot = np.inf
        done = 0
        for done in range(1, iterations + 1):  # noqa: B007  (the count is reported)
            cur_pos, cur_rot = self._frames(self._full(q_arm))
            dp = target_pos - cur_pos
            dr = cur_rot @ pin.log3(cur_rot.T @ target_rot)  # axis-angle error in the base frame
            err_pos, err_rot = float(np.linalg.norm(dp)), float(np.linalg.norm(dr))
            if err_pos < tolerance and err_rot < 10 * tolerance:
                break
            jac = self.jacobian(q_arm) * weights[:, None]
            err = np.concatenate([dp, dr]) * weights
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), err)
            dq = np.clip(dq, -max_joint_step, max_joint_step)
            q_arm = np.clip(q_arm + dq, self.lower, self.upper)
        return IkResult(q_arm, err_pos, err_rot, done)
