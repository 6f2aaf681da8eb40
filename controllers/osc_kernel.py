"""The OSC impedance law compiled with numba (nogil), and the MuJoCo sub-step loop that evaluates it at every
physics step without returning to Python.

Why: a control period of the sim arm is 25 physics steps, each with the law evaluated on fresh kinematics. In
numpy that costs ~150 us per physics step (small-array call overhead, under the GIL) against ~12 us of physics;
compiled, the whole period runs in C speed and releases the GIL, so a thread pool of sims scales over cores.

MuJoCo's own C functions (``mj_step1``, ``mj_jacSite``, ...) are called from the compiled code through ctypes on
the same ``libmujoco`` the Python bindings loaded, with the model/data addresses the bindings expose
(``MjModel._address``); numpy views of ``mjData`` arrays are passed in and written in place.

The law itself is documented in :mod:`robot_rl_controllers.impedance`; gains travel as a float64 vector
(:func:`gain_vector`) so one compiled function serves every gain setting.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os

import llvmlite.binding
import mujoco
import numba
import numpy as np

_LIB = ctypes.CDLL(sorted(glob.glob(os.path.join(os.path.dirname(mujoco.__file__), "libmujoco.so*")))[-1])
_PTR, _I = numba.types.int64, numba.types.intc  # pointers travel as 64-bit integers (x86-64 and arm64 ABIs)


def _c(name: str, *argtypes: numba.types.Type) -> numba.types.ExternalFunction:
    """MuJoCo's C function ``name`` for compiled code: bound by symbol name (registered with LLVM here), so
    the functions calling it can be cached on disk and reused by the next process."""
    llvmlite.binding.add_symbol(name, ctypes.cast(getattr(_LIB, name), ctypes.c_void_p).value)
    return numba.types.ExternalFunction(name, numba.types.void(*argtypes))


_step1 = _c("mj_step1", _PTR, _PTR)
_step2 = _c("mj_step2", _PTR, _PTR)
_forward = _c("mj_forward", _PTR, _PTR)
_jac_site = _c("mj_jacSite", _PTR, _PTR, _PTR, _PTR, _I)
_full_m = _c("mj_fullM", _PTR, _PTR, _PTR)
_solve_m = _c("mj_solveM", _PTR, _PTR, _PTR, _PTR, _I)
_mat2quat = _c("mju_mat2Quat", _PTR, _PTR)

# Layout of the gain vector.
KP_POS, KP_ROT, ZETA, KP_NULL, ZETA_NULL, MAX_POS_ERR, MAX_ROT_ERR, LAMBDA_EPS = range(8)


def gain_vector(gains) -> np.ndarray:
    """The scalar fields of an ``ImpedanceGains`` as the float64 vector the compiled law reads."""
    return np.array([gains.kp_pos, gains.kp_rot, gains.damping_ratio, gains.kp_null, gains.damping_ratio_null,
                     gains.max_pos_error, gains.max_rot_error, gains.lambda_damping], dtype=np.float64)


@numba.njit(nogil=True, cache=True)
def _chol_solve(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
    """x = A^-1 b for a small SPD A (Cholesky, in place in A; pivots floored at 1e-12 as mju_cholFactor does)."""
    k = A.shape[0]
    for j in range(k):
        s = A[j, j]
        for p in range(j):
            s -= A[j, p] * A[j, p]
        s = math.sqrt(max(s, 1e-12))
        A[j, j] = s
        for i in range(j + 1, k):
            t = A[i, j]
            for p in range(j):
                t -= A[i, p] * A[j, p]
            A[i, j] = t / s
    for i in range(k):  # L y = b
        t = b[i]
        for p in range(i):
            t -= A[i, p] * x[p]
        x[i] = t / A[i, i]
    for i in range(k - 1, -1, -1):  # L^T x = y
        t = x[i]
        for p in range(i + 1, k):
            t -= A[p, i] * x[p]
        x[i] = t / A[i, i]


@numba.njit(nogil=True, cache=True)
def osc_law(J: np.ndarray, M: np.ndarray, M_inv: np.ndarray, qd: np.ndarray, q: np.ndarray, bias: np.ndarray,
            pos_err: np.ndarray, rot_err: np.ndarray, twist: np.ndarray, q0: np.ndarray, g: np.ndarray,
            tau_lim: np.ndarray, out: np.ndarray) -> None:
    """One robot's torques into ``out [n]`` (same arguments as ``impedance.osc_torques``, gains as a vector)."""
    n = q.shape[0]
    lam_inv = np.empty((6, 6))
    jm = np.empty((6, n))
    for r in range(6):  # J M^-1
        for c in range(n):
            s = 0.0
            for p in range(n):
                s += J[r, p] * M_inv[p, c]
            jm[r, c] = s
    for r in range(6):  # J M^-1 J^T + eps I
        for c in range(6):
            s = 0.0
            for p in range(n):
                s += jm[r, p] * J[c, p]
            lam_inv[r, c] = s
        lam_inv[r, r] += g[LAMBDA_EPS]
    a = np.empty(6)
    for half, kp_i, max_i in ((0, KP_POS, MAX_POS_ERR), (1, KP_ROT, MAX_ROT_ERR)):
        err = pos_err if half == 0 else rot_err
        norm = math.sqrt(err[0] * err[0] + err[1] * err[1] + err[2] * err[2])
        scale = g[max_i] / norm if norm > g[max_i] else 1.0
        kd = 2.0 * g[ZETA] * math.sqrt(g[kp_i])
        for i in range(3):
            a[3 * half + i] = g[kp_i] * scale * err[i] - kd * twist[3 * half + i]
    qdd0 = np.empty(n)
    kd_null = 2.0 * g[ZETA_NULL] * math.sqrt(g[KP_NULL])
    for i in range(n):
        qdd0[i] = g[KP_NULL] * (q0[i] - q[i]) - kd_null * qd[i]
    for r in range(6):  # a' = a - J qdd0
        s = 0.0
        for p in range(n):
            s += J[r, p] * qdd0[p]
        a[r] -= s
    f = np.empty(6)
    _chol_solve(lam_inv, a, f)
    for i in range(n):  # tau = J^T Lambda a' + M qdd0 + bias, clipped
        s = bias[i]
        for r in range(6):
            s += J[r, i] * f[r]
        for p in range(n):
            s += M[i, p] * qdd0[p]
        lim = tau_lim[i]
        out[i] = min(max(s, -lim), lim)


@numba.njit(nogil=True, cache=True)
def osc_law_batch(J, M, M_inv, qd, q, bias, pos_err, rot_err, twist, q0, g, tau_lim, out) -> None:  # noqa: ANN001
    """:func:`osc_law` over a flat batch: every array has a leading ``[B]`` axis (``q0``/``tau_lim`` too)."""
    for b in range(q.shape[0]):
        osc_law(J[b], M[b], M_inv[b], qd[b], q[b], bias[b], pos_err[b], rot_err[b], twist[b], q0[b], g,
                tau_lim[b], out[b])


@numba.njit(nogil=True, cache=True)
def quat_error(target: np.ndarray, current: np.ndarray, out: np.ndarray) -> None:
    """World-frame axis-angle of the rotation from ``current`` to ``target`` (w-x-y-z), the shorter way round:
    the same result as mju_negQuat -> mju_mulQuat -> mju_quat2Vel(dt=1)."""
    w1, x1, y1, z1 = target[0], target[1], target[2], target[3]
    w2, x2, y2, z2 = current[0], -current[1], -current[2], -current[3]
    w = w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2
    x = w1 * x2 + w2 * x1 + y1 * z2 - z1 * y2
    y = w1 * y2 + w2 * y1 + z1 * x2 - x1 * z2
    z = w1 * z2 + w2 * z1 + x1 * y2 - y1 * x2
    if w < 0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    k = 2.0 * math.atan2(s, w) / s if s > 1e-12 else 2.0
    out[0], out[1], out[2] = k * x, k * y, k * z


@numba.njit(nogil=True, cache=True)
def read_arm(m: int, d: int, site: int, dof0: int, qpos0: int, qpos: np.ndarray, qvel: np.ndarray,
             qfrc_bias: np.ndarray, site_xpos: np.ndarray, site_xmat: np.ndarray, jac: np.ndarray,
             m_full: np.ndarray, eye_rows: np.ndarray, minv_rows: np.ndarray, J: np.ndarray, M: np.ndarray,
             M_inv: np.ndarray, q: np.ndarray, qd: np.ndarray, bias: np.ndarray, pos: np.ndarray,
             quat: np.ndarray, twist: np.ndarray) -> None:
    """Fills the OSC inputs (J, M, M^-1, q, qd, bias, EE pose and twist) from mjData (kinematics current)."""
    n = q.shape[0]
    _jac_site(m, d, jac.ctypes.data, jac[3:].ctypes.data, site)
    _full_m(m, d, m_full.ctypes.data)
    _solve_m(m, d, minv_rows.ctypes.data, eye_rows.ctypes.data, n)
    for i in range(n):
        q[i] = qpos[qpos0 + i]
        qd[i] = qvel[dof0 + i]
        bias[i] = qfrc_bias[dof0 + i]
        for r in range(6):
            J[r, i] = jac[r, dof0 + i]
        for c in range(n):
            M[i, c] = m_full[dof0 + i, dof0 + c]
            M_inv[i, c] = minv_rows[i, dof0 + c]
    for i in range(3):
        pos[i] = site_xpos[site, i]
    _mat2quat(quat.ctypes.data, site_xmat[site].ctypes.data)
    for r in range(6):
        s = 0.0
        for i in range(n):
            s += J[r, i] * qd[i]
        twist[r] = s


@numba.njit(nogil=True, cache=True)
def simulate_arm(m: int, d: int, nsteps: int, site: int, dof0: int, qpos0: int, ctrl0: int, qpos: np.ndarray,
                 qvel: np.ndarray, qfrc_bias: np.ndarray, site_xpos: np.ndarray, site_xmat: np.ndarray,
                 ctrl: np.ndarray, target_pos: np.ndarray, target_quat: np.ndarray, q0: np.ndarray,
                 g: np.ndarray, tau_lim: np.ndarray, jac: np.ndarray, m_full: np.ndarray, eye_rows: np.ndarray,
                 minv_rows: np.ndarray) -> None:
    """``nsteps`` physics steps, each ``mj_step1 -> read_arm -> osc_law -> ctrl -> mj_step2``, then
    ``mj_forward`` so sensors and observations describe the new state."""
    n = q0.shape[0]
    J, M, M_inv = np.empty((6, n)), np.empty((n, n)), np.empty((n, n))
    q, qd, bias, tau = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    pos, quat, twist, pos_err, rot_err = np.empty(3), np.empty(4), np.empty(6), np.empty(3), np.empty(3)
    for _ in range(nsteps):
        _step1(m, d)
        read_arm(m, d, site, dof0, qpos0, qpos, qvel, qfrc_bias, site_xpos, site_xmat, jac, m_full, eye_rows,
                 minv_rows, J, M, M_inv, q, qd, bias, pos, quat, twist)
        for i in range(3):
            pos_err[i] = target_pos[i] - pos[i]
        quat_error(target_quat, quat, rot_err)
        osc_law(J, M, M_inv, qd, q, bias, pos_err, rot_err, twist, q0, g, tau_lim, tau)
        for i in range(n):
            ctrl[ctrl0 + i] = tau[i]
        _step2(m, d)
    _forward(m, d)
