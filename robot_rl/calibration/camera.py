"""The camera's pose, lens and colour from the robot's own images: each logged frame of the arm held still is
rendered in the sim with the arm where its joint states put it, from a candidate camera (a pose offset from where
the robot's description puts the camera, a focal length error), and CMA-ES finds the candidate whose renders match
the frames best. The colour gain of each channel (white balance, exposure) is fitted in closed form per candidate.

Why frames of a held arm: a real camera's exposure, rolling shutter and latency blur the moment an image shows
while the arm moves; held, the joint states at any time in the hold are the arm the image shows. Why the images are
blurred before they are compared: the renderer does not antialias, so a sub-pixel change of the camera moves edges
by whole pixels; blurred, the error changes smoothly with the candidate. Why a trimmed error: things the log does
not describe (the task's object wherever a person left it, a cable) differ whatever the camera; a first search leaves
out the worst 10 % of pixels, a second only those that err far more than the rest there."""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import mujoco
import numpy as np

from robot_rl.calibration.fit import worker_count
from robot_rl.calibration.log import DriverLog
from robot_rl.utils.log import get_logger
from robot_rl_sim import arm_tasks
from robot_rl_sim.camera_error import true_fovy

logger = get_logger(__name__)

BOX = np.array([0.03, 0.03, 0.03, 5.0, 5.0, 5.0, 0.1])
"""Search half-widths: camera position offset (m, along the camera's x, y, z), rotation (degrees about them), focal
length error (fraction). A hand-eye calibration off by more than 3 cm or 5 degrees is a mistake to fix first."""


@dataclass
class CameraFitConfig:
    """How a camera's pose, lens and colour are fitted from the log's images."""

    frames: int = 12
    """Logged frames of the held arm fitted (spread over the log; each evaluation renders every one, so the fit's
    time grows with them; six left the fixed camera's offset 1-2 mm off along its axis, twelve within 0.2)."""
    hold_average: float = 0.3
    """s of joint states either side of a frame's stamp averaged into the arm it shows (those while every joint was
    held still): the joints' sensor noise is averaged out of the pose rendered (the nearest state alone left the
    ``typical`` front camera's offset 3.8 mm for 3 on a 40 s log; averaged over 0.6 s, 3.2). 0: the nearest state."""
    size: int = 128
    """Pixels (square) the frames are shrunk to and the sim renders at: the blur and the search then behave the same
    whatever the camera's resolution (256-pixel frames left the front camera's depth and focal length trading, 12 mm
    against -1.3 %, where 128 found both)."""
    blur: float = 1.5
    """Pixels of Gaussian blur on renders and frames before they are compared (the renderer does not antialias)."""
    trim: float = 0.1
    """Share of pixels with the largest error left out by the first search (what the log does not describe, such as
    the object), which finds the basin."""
    outlier: float = 60.0
    """Error (0-255, blurred) above which a pixel at the first search's best shows what the log does not describe;
    the second search leaves out only those (their share, plus half a percent). Why: a trimmed error also leaves out
    the arm's edges where a camera almost right errs most; at a fixed 10 % the front camera's searches settled 1-3
    mm off along its axis with a smaller error than the true camera's, at a fixed 3 % the wrist camera's were drawn
    to the cube (large in its view)."""
    iterations: int = 80
    """CMA-ES generations of the first search."""
    refit_iterations: int = 150
    """CMA-ES generations of the second search, from the first's best (0: none, the first search's best is
    polished; fewer settle short: 80 left the front camera 3.6-3.8 mm off for 3, 150 found 3.15)."""
    refine_iterations: int = 20
    """Least-squares iterations on the pixel residuals from CMA-ES's best (0: CMA-ES alone)."""
    population: int = 14
    """Candidates per generation."""
    seed: int = 0
    """CMA-ES seed."""
    workers: int = 0
    """Processes rendering a generation's candidates (0: one per CPU core, at most the population; 1: this one).
    Each renders every frame of a candidate; the fit is the same whatever their number."""

    def validate(self) -> None:
        if (self.workers < 0 or self.frames < 1 or self.hold_average < 0 or self.size < 16 or self.blur < 0
                or not 0 <= self.trim < 0.5 or self.iterations < 1 or self.population < 4
                or self.refine_iterations < 0 or self.refit_iterations < 0
                or self.outlier <= 0):
            raise ValueError("calibrate: camera.workers >= 0, camera.frames >= 1, camera.hold_average >= 0, "
                             "camera.size >= 16, "
                             "camera.blur >= 0, camera.trim in "
                             "[0, 0.5), camera.iterations >= 1, camera.refine_iterations >= 0, camera.population >= 4, "
                             "camera.refit_iterations >= 0, camera.outlier > 0")


@dataclass
class CameraFrame:
    """One logged image and the arm it shows."""

    image: np.ndarray
    """uint8 [H, W, 3] RGB, square."""
    q: np.ndarray
    """[7] the arm's joint positions when it was taken."""
    opening: float
    """m: the gripper's opening then (NaN: unknown, the sim's own)."""
    stamp: float = 0.0
    """s: its header stamp."""


@dataclass
class CameraCalibration:
    """A camera as fitted: where it is, its lens and colour, relative to what the robot's description says."""

    camera: str
    """The sim camera's name (the profile camera's ``name``)."""
    position: list[float]
    """m: the camera's offset from its described position, along its own x (right), y (up), z (backwards) axes."""
    rotation: list[float]
    """degrees: its rotation from its described orientation (a rotation vector in its own axes)."""
    focal_error: float
    """The lens's focal length is 1 + this times the described one."""
    gains: list[float]
    """The images' gain on R, G and B against the sim's renders."""
    latency: float
    """s: median of (logged - stamped) over the frames (NaN: the log has no logging times)."""
    rms_before: float
    """Image RMS error (0-255, blurred, trimmed) of the described camera, sim colours."""
    rms_after: float
    """The same with the fitted camera and gains."""
    frames: int
    """Frames fitted."""
    evaluations: int
    """Candidates rendered."""
    seconds: float
    """s the fit took."""
    history: list[float] = field(default_factory=list)
    """Best error after each generation, of the first search and then of the second (their trims differ)."""

    def reality(self) -> dict[str, float]:
        """As a reality profile's camera fields (magnitudes: the profile's offset lies along the optical diagonal
        and its rotation is a pan; the fit is in any direction)."""
        g = self.gains
        return {"camera_latency": round(self.latency, 4) if math.isfinite(self.latency) else 0.0,
                "camera_position_error": round(float(np.linalg.norm(self.position)), 5),
                "camera_rotation_error": round(float(np.linalg.norm(self.rotation)), 3),
                "camera_focal_error": round(max(0.0, self.focal_error), 4),
                "brightness_change": round(max(0.0, ((g[0] + g[1]) / 2 - g[2]) / 2), 4)}

    def summary(self) -> dict:
        return {**asdict(self), "reality": self.reality()}


def candidate_pose(xpos: np.ndarray, xmat: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The world position and orientation (3x3) of a camera described at ``xpos``, ``xmat`` (MuJoCo's camera axes as
    columns) offset by ``x``: position (m) and rotation vector (degrees) in the camera's own axes."""
    from scipy.spatial.transform import Rotation  # deferred: only calibration needs scipy

    xmat = np.asarray(xmat, np.float64).reshape(3, 3)
    turn = Rotation.from_rotvec(np.radians(x[3:6])).as_matrix()
    return np.asarray(xpos, np.float64) + xmat @ x[:3], xmat @ turn


def project(points: np.ndarray, pos: np.ndarray, mat: np.ndarray, fovy: float, size: int) -> np.ndarray:
    """[N, 2] pixel coordinates (column, row; the image's top left is 0, 0) of world ``points`` [N, 3] in a square
    ``size`` image from a camera at ``pos`` with orientation ``mat`` (3x3, MuJoCo's camera axes as columns: x right,
    y up, looking along -z) and vertical field of view ``fovy`` (degrees)."""
    local = (np.asarray(points, np.float64) - pos) @ np.asarray(mat, np.float64).reshape(3, 3)
    focal = size / 2.0 / math.tan(math.radians(fovy) / 2.0)
    depth = -local[:, 2]
    return np.stack([size / 2.0 + focal * local[:, 0] / depth, size / 2.0 - focal * local[:, 1] / depth], axis=1)


class CameraScene:
    """The sim task's scene rendering a camera from candidate poses and lenses, the arm as each frame shows it."""

    def __init__(self, task: str, camera: str, frames: list[CameraFrame], blur: float, size: int = 128) -> None:
        import cv2  # optional: cameras

        shapes = {f.image.shape for f in frames}
        if len(shapes) != 1 or (shape := next(iter(shapes)))[0] != shape[1] or shape[2:] != (3,):
            raise ValueError(f"calibrate: camera {camera}: frames must be square RGB of one size (got {shapes}); "
                             "resize them to a square in the profile (resize: [N, N])")
        if shape[0] > size:  # shrunk as the camera's pixels average, not sampled
            frames = [CameraFrame(cv2.resize(f.image, (size, size), interpolation=cv2.INTER_AREA), f.q, f.opening,
                                  f.stamp) for f in frames]
            shape = (size, size, 3)
        self.env = getattr(arm_tasks, f"{task}Env")(image_size=0)
        self.env.reset(seed=0)
        m = self.env.model
        if camera not in [m.camera(c).name for c in range(m.ncam)]:
            raise ValueError(f"calibrate: {camera!r} is not a camera of the sim's {task} scene")
        self.camera, self.cid, self.size, self.blur = camera, m.camera(camera).id, shape[0], blur
        self.fovy = float(m.cam_fovy[self.cid])
        self.frames = frames
        self.targets = np.stack([self._smooth(f.image) for f in frames])
        # saturated pixels cannot show a gain above 1: out of the fit, with what blur spreads into
        bright = np.stack([self._smooth((f.image.max(axis=2) < 250).astype(np.float32)) for f in frames])
        self.valid = bright > 0.99

    def _smooth(self, image: np.ndarray) -> np.ndarray:
        import cv2  # optional: cameras

        image = np.asarray(image, np.float32)
        return cv2.GaussianBlur(image, (0, 0), self.blur) if self.blur > 0 else image

    def render(self, x: np.ndarray) -> np.ndarray:
        """[F, H, W, 3] float renders of every frame's arm from the camera offset by ``x`` (see ``BOX``)."""
        env, m, d = self.env, self.env.model, self.env.data
        out = []
        try:
            m.cam_fovy[self.cid] = true_fovy(self.fovy, float(x[6]))
            for f in self.frames:
                d.qpos[env.arm_qpos] = f.q
                if math.isfinite(f.opening):
                    d.qpos[env.finger_qpos] = f.opening / 2.0
                mujoco.mj_forward(m, d)
                pos, mat = candidate_pose(d.cam_xpos[self.cid], d.cam_xmat[self.cid], x)
                d.cam_xpos[self.cid], d.cam_xmat[self.cid] = pos, mat.reshape(-1)
                out.append(self._smooth(env.render_camera(self.camera, self.size)))
        finally:
            m.cam_fovy[self.cid] = self.fovy
        return np.stack(out)

    def residuals(self, x: np.ndarray, gains: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """[P, 3] the renders from ``x`` times the per-channel gains that fit the frames best (or ``gains``) minus
        the frames, at their valid pixels; and the gains."""
        rendered, target, valid = self.render(x), self.targets, self.valid
        if gains is None:
            r, t = rendered[valid], target[valid]
            gains = (r * t).sum(axis=0) / np.maximum((r * r).sum(axis=0), 1e-9)
        return (rendered * gains - target)[valid], gains

    def error(self, x: np.ndarray, gains: np.ndarray | None = None, trim: float = 0.1) -> tuple[float, np.ndarray]:
        """The trimmed RMS error of the renders from ``x`` against the frames (see :meth:`residuals`), and the
        gains."""
        residual, gains = self.residuals(x, gains)
        return trimmed_rms(residual, trim), gains


def trimmed_rms(residual: np.ndarray, trim: float) -> float:
    """RMS over pixels of their largest channel error, the worst ``trim`` share left out."""
    worst = np.abs(residual).max(axis=1)
    keep = np.sort(worst)[: max(1, int(len(worst) * (1.0 - trim)))]
    return float(np.sqrt(np.mean(keep ** 2)))


def held_frames(images: list[tuple[float, float, np.ndarray]], log: DriverLog, count: int,
                still: float = 0.01, average: float = 0.0) -> list[CameraFrame]:
    """Up to ``count`` frames (stamp, logged time, image), spread over the log, taken while every joint moved
    slower than ``still`` rad/s, each with the joint state nearest its stamp, or with ``average`` > 0 the mean of the
    states within ``average`` s of it in the same hold (the arm is still, its sensor noise is not)."""
    held = []
    resting = np.all(np.abs(log.state_qd) < still, axis=1)
    stamps = log.state_stamp
    for stamp, _, image in images:
        i = int(np.clip(np.searchsorted(stamps, stamp), 1, len(stamps) - 1))
        i = i if abs(stamps[i] - stamp) < abs(stamps[i - 1] - stamp) else i - 1
        if abs(stamps[i] - stamp) < 0.05 and resting[i]:
            lo, hi = i, i + 1  # the hold around i, no further than ``average`` either side
            while lo > 0 and resting[lo - 1] and stamp - stamps[lo - 1] <= average:
                lo -= 1
            while hi < len(stamps) and resting[hi] and stamps[hi] - stamp <= average:
                hi += 1
            held.append(CameraFrame(image=image, q=log.state_q[lo:hi].mean(axis=0),
                                    opening=float(np.mean(log.opening[lo:hi])), stamp=stamp))
    if not held:
        raise ValueError("calibrate: no image was taken while the arm was held still (record the log with "
                         "robot-rl record-excitation, which records the cameras during its holds)")
    pick = np.unique(np.linspace(0, len(held) - 1, min(count, len(held))).round().astype(int))
    return [held[k] for k in pick]


def _polish(scene: CameraScene, x: np.ndarray, cfg: CameraFitConfig, trim: float) -> tuple[np.ndarray, int]:
    """scipy's trust-region least squares on the pixel residuals from CMA-ES's best (``x``, in units of ``BOX``),
    robust (soft L1) where CMA-ES's error is trimmed. Returns the point of the least error trimmed by ``trim`` (the
    last search's) seen, and the renders made."""
    from scipy.optimize import least_squares  # deferred: only calibration needs scipy

    best = [scene.error(x * BOX, trim=trim)[0], x]
    renders = [0]

    def residuals(u: np.ndarray) -> np.ndarray:
        renders[0] += 1
        residual, _ = scene.residuals(u * BOX)
        if (error := trimmed_rms(residual, trim)) < best[0]:
            best[:] = [error, u.copy()]
        return residual.ravel()

    least_squares(residuals, np.clip(x, -1.0, 1.0), bounds=(-1.0, 1.0), method="trf", loss="soft_l1",
                  f_scale=2.0, diff_step=1e-2, max_nfev=cfg.refine_iterations)
    return best[1], renders[0]


_SCENE: CameraScene | None = None
"""A worker's scene (built once by :func:`_start_worker`)."""


def _start_worker(task: str, camera: str, frames: list[CameraFrame], blur: float, size: int) -> None:
    global _SCENE
    _SCENE = CameraScene(task, camera, frames, blur, size)


def _error_of(job: tuple[list[float], float]) -> float:
    u, trim = job
    return _SCENE.error(np.asarray(u) * BOX, trim=trim)[0]


def _scorer(scene: CameraScene, task: str, frames: list[CameraFrame], cfg: CameraFitConfig):
    """A pool of worker processes, each with a scene of its own (spawned: a forked renderer's OpenGL context is not
    the child's), and a function scoring candidates (in units of ``BOX``) trimmed by ``trim`` on it; or, with one
    worker, no pool and ``scene`` scoring them here."""
    workers = worker_count(cfg.workers, cfg.population)
    if workers <= 1:
        return None, lambda candidates, trim: [scene.error(np.asarray(u) * BOX, trim=trim)[0] for u in candidates]
    pool = multiprocessing.get_context("spawn").Pool(workers, _start_worker,
                                                      (task, scene.camera, frames, cfg.blur, cfg.size))
    return pool, lambda candidates, trim: pool.map(_error_of, [(list(u), trim) for u in candidates])


def _search(score: Callable, start: np.ndarray, sigma: float, iterations: int, trim: float, cfg: CameraFitConfig,
            history: list[float], name: str, started: float):
    """CMA-ES on the error trimmed by ``trim`` (``score(candidates, trim)``) from ``start`` (in units of ``BOX``);
    each generation's best error is appended to ``history``."""
    import cma  # deferred: only calibration needs it

    options = {"bounds": [-1.0, 1.0], "popsize": cfg.population, "seed": cfg.seed + 1, "verbose": -9,
               "maxiter": iterations}
    es = cma.CMAEvolutionStrategy(np.clip(start, -1.0, 1.0), sigma, options)
    while not es.stop():
        candidates = es.ask()
        es.tell(candidates, score(candidates, trim))
        history.append(float(es.result.fbest))
        if len(history) % 10 == 0:
            logger.info(f"calibrate: camera {name}: generation {len(history)}: image RMS {es.result.fbest:.2f} "
                        f"({time.monotonic() - started:.0f} s)")
    return es


def fit_camera(frames: list[CameraFrame], camera: str, cfg: CameraFitConfig, task: str = "PickCube",
               latency: float = float("nan")) -> CameraCalibration:
    """See the module docstring. ``latency``: the camera's, read off the log (reported alongside)."""
    cfg.validate()
    started = time.monotonic()
    scene = CameraScene(task, camera, frames, cfg.blur, cfg.size)
    before, _ = scene.error(np.zeros(7), gains=np.ones(3), trim=cfg.trim)
    history: list[float] = []
    pool, score = _scorer(scene, task, frames, cfg)
    try:
        es = _search(score, np.zeros(7), 0.3, cfg.iterations, cfg.trim, cfg, history, camera, started)
        x, evaluations, trim = np.asarray(es.result.xbest), int(es.result.evaluations), cfg.trim
        if cfg.refit_iterations:
            worst = np.abs(scene.residuals(x * BOX)[0]).max(axis=1)
            trim = float(np.mean(worst > cfg.outlier)) + 0.005
            es = _search(score, x, 0.3, cfg.refit_iterations, trim, cfg, history, f"{camera} (refit)", started)
            x, evaluations = np.asarray(es.result.xbest), evaluations + int(es.result.evaluations)
    finally:
        if pool is not None:
            pool.terminate()
    if cfg.refine_iterations:
        x, replays = _polish(scene, x, cfg, trim)
        evaluations += replays
        full = frames[0].image.shape[0]
        if full > scene.size:  # then on the frames as taken, blurred as much in the scene's terms
            x, replays = _polish(CameraScene(task, camera, frames, cfg.blur * full / scene.size, full), x, cfg, trim)
            evaluations += replays
    x = x * BOX
    after, gains = scene.error(x, trim=cfg.trim)
    return CameraCalibration(camera=camera, position=[float(v) for v in x[:3]], rotation=[float(v) for v in x[3:6]],
                             focal_error=float(x[6]), gains=[float(g) for g in gains], latency=latency,
                             rms_before=before, rms_after=after, frames=len(frames),
                             evaluations=evaluations, seconds=time.monotonic() - started,
                             history=history)
