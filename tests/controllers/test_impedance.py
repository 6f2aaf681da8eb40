"""The OSC impedance law: algebra (batching, nullspace consistency, limits) and Cartesian tracking on the
7-DoF arm in MuJoCo. Tracking tolerance: < 5 mm position and < 0.05 rad orientation error after 1.5 s."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from robot_rl_controllers.arm_model import ARM_JOINTS, EE_SITE, HOME_QPOS, build_arm_xml  # noqa: E402
from robot_rl_controllers.impedance import (  # noqa: E402
    ImpedanceGains,
    MujocoArmState,
    orientation_error,
    osc_torques,
)

POS_TOL = 0.005
ROT_TOL = 0.05


def _random_problem(rng, batch=(), n=7):
    A = rng.normal(size=(*batch, n, n))
    M = A @ np.swapaxes(A, -1, -2) + n * np.eye(n)
    J = rng.normal(size=(*batch, 6, n))
    qd, q, bias, q0 = (rng.normal(size=(*batch, n)) for _ in range(4))
    pos_err = rng.normal(size=(*batch, 3)) * 0.01
    rot_err = rng.normal(size=(*batch, 3)) * 0.05
    twist = rng.normal(size=(*batch, 6)) * 0.1
    return J, M, qd, q, bias, pos_err, rot_err, twist, q0


def test_batched_call_equals_per_robot_calls_and_explicit_projector_reference():
    rng = np.random.default_rng(0)
    gains = ImpedanceGains(torque_limits=1e9)
    args = _random_problem(rng, batch=(4, 3))
    batched = osc_torques(*args, gains)
    assert batched.shape == (4, 3, 7)
    for i in range(4):
        for j in range(3):
            single = osc_torques(*(a[i, j] for a in args), gains)
            np.testing.assert_allclose(batched[i, j], single, rtol=1e-9, atol=1e-9)
    # Reference: tau = J^T Lambda (Kp e - Kd v) + N^T M qdd0 + bias with the explicit projector N^T.
    J, M, qd, q, bias, pe, re, tw, q0 = (a[0, 0] for a in args)
    Minv = np.linalg.inv(M)
    Lam = np.linalg.inv(J @ Minv @ J.T + gains.lambda_damping * np.eye(6))
    kp = np.repeat([gains.kp_pos, gains.kp_rot], 3)
    F = Lam @ (kp * np.concatenate([pe, re]) - 2 * np.sqrt(kp) * tw)
    NT = np.eye(7) - J.T @ (Minv @ J.T @ Lam).T
    tau0 = M @ (gains.kp_null * (q0 - q) - 2 * np.sqrt(gains.kp_null) * qd)
    np.testing.assert_allclose(batched[0, 0], J.T @ F + NT @ tau0 + bias, rtol=1e-9, atol=1e-9)


def test_nullspace_term_is_dynamically_consistent():
    """The posture torque produces no EE acceleration: J M^-1 (tau - J^T F - bias) = 0."""
    rng = np.random.default_rng(1)
    J, M, qd, q, bias, _, _, _, q0 = _random_problem(rng)
    gains = ImpedanceGains(torque_limits=1e9, lambda_damping=0.0)
    zero3, zero6 = np.zeros(3), np.zeros(6)
    tau = osc_torques(J, M, qd, q, bias, zero3, zero3, zero6, q0, gains)  # no task force: only posture + bias
    assert np.linalg.norm(tau - bias) > 1.0  # the posture term is active
    np.testing.assert_allclose(J @ np.linalg.solve(M, tau - bias), 0.0, atol=1e-8)


def test_torque_limits_and_error_clipping():
    rng = np.random.default_rng(2)
    J, M, qd, q, bias, _, rot_err, twist, q0 = _random_problem(rng)
    gains = ImpedanceGains(torque_limits=(5.0,) * 7, max_pos_error=0.02)
    tau = osc_torques(J, M, qd, q, bias, np.array([10.0, 0, 0]), rot_err, twist, q0, gains)
    assert np.all(np.abs(tau) <= 5.0 + 1e-12)
    free = ImpedanceGains(torque_limits=1e9, max_pos_error=0.02)
    far = osc_torques(J, M, qd, q, bias, np.array([10.0, 0, 0]), rot_err, twist, q0, free)
    at_clip = osc_torques(J, M, qd, q, bias, np.array([0.02, 0, 0]), rot_err, twist, q0, free)
    np.testing.assert_allclose(far, at_clip)  # a runaway target gives no more force than max_pos_error
    with pytest.raises(ValueError):
        ImpedanceGains(kp_pos=-1.0).validate()


def test_orientation_error_matches_axis_angle():
    rng = np.random.default_rng(3)
    q_cur = rng.normal(size=(5, 4))
    q_cur /= np.linalg.norm(q_cur, axis=-1, keepdims=True)
    aa = rng.normal(size=(5, 3)) * 0.7
    q_tgt = np.empty_like(q_cur)
    for i in range(5):
        dq = np.empty(4)
        mujoco.mju_axisAngle2Quat(dq, aa[i] / np.linalg.norm(aa[i]), np.linalg.norm(aa[i]))
        mujoco.mju_mulQuat(q_tgt[i], dq, q_cur[i])  # world-frame rotation applied to the current orientation
    np.testing.assert_allclose(orientation_error(q_tgt, q_cur), aa, atol=1e-9)
    np.testing.assert_allclose(orientation_error(-q_tgt, q_cur), aa, atol=1e-9)  # sign of a quaternion is moot
    np.testing.assert_allclose(orientation_error(q_cur, q_cur), 0.0, atol=1e-12)


@pytest.mark.parametrize("offset", [(0.1, 0.15, -0.1), (-0.15, -0.2, 0.05), (0.15, 0.0, -0.2)])
def test_tracks_cartesian_target_on_the_arm(offset):
    model = mujoco.MjModel.from_xml_string(build_arm_xml())
    data = mujoco.MjData(model)
    data.qpos[:7] = HOME_QPOS
    mujoco.mj_forward(model, data)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, EE_SITE)
    dof0 = model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, ARM_JOINTS[0])]
    arm = MujocoArmState(model, site, range(dof0, dof0 + 7))
    home_quat = np.empty(4)
    mujoco.mju_mat2Quat(home_quat, data.site_xmat[site])
    target_quat = np.empty(4)  # also tilt the hand by 0.2 rad about world x
    mujoco.mju_axisAngle2Quat(target_quat, np.array([1.0, 0, 0]), 0.2)
    mujoco.mju_mulQuat(target_quat, target_quat.copy(), home_quat)
    target = data.site_xpos[site] + np.asarray(offset)
    for _ in range(750):  # 1.5 s at 500 Hz
        mujoco.mj_step1(model, data)
        arm.update(data)
        data.ctrl[:7] = arm.torques(target, target_quat, HOME_QPOS)
        mujoco.mj_step2(model, data)
    mujoco.mj_forward(model, data)
    arm.update(data)
    assert np.linalg.norm(target - data.site_xpos[site]) < POS_TOL
    assert np.linalg.norm(arm.rot_error(target_quat)) < ROT_TOL
    assert np.linalg.norm(arm.twist) < 0.01  # settled


def _arm_at_home():
    model = mujoco.MjModel.from_xml_string(build_arm_xml(("cube",)))
    data = mujoco.MjData(model)
    data.qpos[:7] = HOME_QPOS
    mujoco.mj_forward(model, data)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, EE_SITE)
    dof0 = model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, ARM_JOINTS[0])]
    return model, data, site, MujocoArmState(model, site, range(dof0, dof0 + 7))


def test_compiled_read_of_the_arm_equals_mujoco_python_calls():
    model, data, site, arm = _arm_at_home()
    data.qvel[:7] = np.linspace(-0.5, 0.5, 7)
    mujoco.mj_forward(model, data)
    arm.update(data)
    jacp, jacr, M = np.zeros((3, model.nv)), np.zeros((3, model.nv)), np.zeros((model.nv, model.nv))
    mujoco.mj_jacSite(model, data, jacp, jacr, site)
    mujoco.mj_fullM(model, data, M)
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, data.site_xmat[site])
    np.testing.assert_array_equal(arm.J, np.vstack([jacp, jacr])[:, :7])
    np.testing.assert_array_equal(arm.M, M[:7, :7])
    np.testing.assert_allclose(arm.M_inv, np.linalg.inv(M)[:7, :7], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(arm.quat, quat)
    np.testing.assert_allclose(arm.twist, arm.J @ data.qvel[:7], atol=1e-12)
    np.testing.assert_array_equal(arm.bias, data.qfrc_bias[:7])
    target = np.array([0.3, -0.5, 0.7, 0.4])
    target /= np.linalg.norm(target)
    np.testing.assert_allclose(arm.rot_error(target), orientation_error(target, quat), atol=1e-12)


def test_compiled_control_periods_equal_the_python_step_loop():
    """MujocoArmState.simulate (the sim's GIL-free path) reproduces mj_step1 -> update -> torques -> mj_step2."""
    model, data, site, arm = _arm_at_home()
    twin = mujoco.MjData(model)
    mujoco.mj_copyData(twin, model, data)
    target = data.site_xpos[site] + np.array([0.1, -0.05, -0.1])
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, data.site_xmat[site])
    arm.simulate(data, 100, target, quat, HOME_QPOS)
    for _ in range(100):
        mujoco.mj_step1(model, twin)
        arm.update(twin)
        twin.ctrl[:7] = arm.torques(target, quat, HOME_QPOS)
        mujoco.mj_step2(model, twin)
    mujoco.mj_forward(model, twin)
    np.testing.assert_allclose(data.qpos, twin.qpos, atol=1e-12)
    np.testing.assert_allclose(data.qvel, twin.qvel, atol=1e-9)
    assert np.linalg.norm(data.site_xpos[site] - site_start(model, site)) > 0.05  # it moved towards the target


def site_start(model, site):
    d = mujoco.MjData(model)
    d.qpos[:7] = HOME_QPOS
    mujoco.mj_forward(model, d)
    return d.site_xpos[site].copy()
