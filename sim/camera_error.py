"""A camera that is not where, or not the lens, its description says (a reality profile's camera errors): the image
is rendered from the true pose and focal length, while the model (which TF and CameraInfo are read from) keeps the
described ones."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import mujoco
import numpy as np

from robot_rl_sim.reality import RealityProfile


def true_fovy(fovy_deg: float, focal_error: float) -> float:
    """The vertical field of view (degrees) of a lens whose focal length is ``1 + focal_error`` times the one
    ``fovy_deg`` implies."""
    return math.degrees(2.0 * math.atan(math.tan(math.radians(fovy_deg) / 2.0) / (1.0 + focal_error)))


def true_pose(xpos: np.ndarray, xmat: np.ndarray, reality: RealityProfile) -> tuple[np.ndarray, np.ndarray]:
    """The camera's true world position and orientation (3x3, MuJoCo's camera axes as columns: x right, y up, z
    backwards) from its described ones."""
    xmat = np.asarray(xmat, np.float64).reshape(3, 3)
    a = math.radians(reality.camera_rotation_error)
    pan = np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0], [-math.sin(a), 0.0, math.cos(a)]])
    # MuJoCo's camera frame (x right, y up, z back) and the optical frame (x right, y down, z forward) share x
    diagonal = xmat @ np.array([1.0, -1.0, -1.0]) / math.sqrt(3.0)
    return np.asarray(xpos, np.float64) + reality.camera_position_error * diagonal, xmat @ pan


@contextmanager
def camera_error(model: mujoco.MjModel, data: mujoco.MjData, camera: str,
                 reality: RealityProfile) -> Iterator[None]:
    """Within: ``camera`` renders from its true pose and lens (set on ``data`` and ``model``); after: as described.
    ``data``'s camera pose is recomputed by the next forward pass anyway; it is put back so that nothing read
    before then sees the true one. A profile without camera errors changes nothing."""
    if not (reality.camera_position_error or reality.camera_rotation_error or reality.camera_focal_error):
        yield
        return
    cid = model.camera(camera).id
    pos, mat, fovy = data.cam_xpos[cid].copy(), data.cam_xmat[cid].copy(), float(model.cam_fovy[cid])
    new_pos, new_mat = true_pose(pos, mat, reality)
    data.cam_xpos[cid], data.cam_xmat[cid] = new_pos, new_mat.reshape(-1)
    model.cam_fovy[cid] = true_fovy(fovy, reality.camera_focal_error)
    try:
        yield
    finally:
        data.cam_xpos[cid], data.cam_xmat[cid], model.cam_fovy[cid] = pos, mat, fovy
