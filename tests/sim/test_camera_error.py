"""A reality profile's camera errors (robot_rl_sim.camera_error): the image comes from where the camera truly is and
through its true lens, while the model, which TF and CameraInfo are read from, keeps the described pose and
intrinsics."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from robot_rl_sim.arm_tasks import PickCubeEnv
from robot_rl_sim.camera_error import camera_error
from robot_rl_sim.reality import RealityProfile, load_reality

SIZE = 128


@pytest.fixture(scope="module")
def env():
    env = PickCubeEnv(image_size=SIZE)
    env.reset(seed=0)
    yield env
    env.close()


def _render(env, reality: RealityProfile | None) -> np.ndarray:
    if reality is None:
        return env.render_camera("front", SIZE).astype(np.float32)
    with camera_error(env.model, env.data, "front", reality):
        return env.render_camera("front", SIZE).astype(np.float32)


def _focal(env) -> float:
    return 0.5 * SIZE / math.tan(math.radians(float(env.model.cam_fovy[env.model.camera("front").id])) / 2)


def test_a_panned_camera_moves_the_image_sideways_by_f_tan_angle(env) -> None:
    nominal = _render(env, None)
    panned = _render(env, RealityProfile(camera_rotation_error=2.0))
    (dx, dy), _ = cv2.phaseCorrelate(cv2.cvtColor(nominal, cv2.COLOR_RGB2GRAY),
                                     cv2.cvtColor(panned, cv2.COLOR_RGB2GRAY))
    expected = _focal(env) * math.tan(math.radians(2.0))  # 5.4 px at 128 px and 45 degrees
    assert abs(abs(dx) - expected) < 0.7 and abs(dy) < 0.5, (dx, dy, expected)


def test_a_longer_lens_zooms_the_image_and_nothing_else_changes(env) -> None:
    cid = env.model.camera("front").id
    pos, mat, fovy = env.data.cam_xpos[cid].copy(), env.data.cam_xmat[cid].copy(), float(env.model.cam_fovy[cid])
    nominal = _render(env, None)
    zoomed = _render(env, RealityProfile(camera_focal_error=0.1))
    c = (SIZE - 1) / 2
    scaled = cv2.warpAffine(nominal, cv2.getRotationMatrix2D((c, c), 0.0, 1.1), (SIZE, SIZE))
    inner = slice(16, SIZE - 16)  # away from the borders the scaling leaves empty
    assert (np.abs(zoomed - scaled)[inner, inner].mean() < 0.3 * np.abs(zoomed - nominal)[inner, inner].mean())
    # what TF and CameraInfo read stays as described
    assert np.array_equal(env.data.cam_xpos[cid], pos) and np.array_equal(env.data.cam_xmat[cid], mat)
    assert float(env.model.cam_fovy[cid]) == fovy


def test_typical_moves_the_camera_by_a_few_pixels(env) -> None:
    nominal = _render(env, None)
    typical = _render(env, load_reality("typical"))
    moved = np.abs(typical - nominal).mean(axis=-1) > 20
    assert 0.01 < moved.mean() < 0.5, moved.mean()  # edges moved; not a different scene
