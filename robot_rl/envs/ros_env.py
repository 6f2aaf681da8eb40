"""RosArmEnv: a gymnasium env over a ROS 2 arm (the sim hardware node or a real arm behind the same topics).

Same action and observation layout as the sim arm tasks (:mod:`robot_rl_sim.arm_env`), so a policy trained in
sim runs here unchanged: action ``[dx, dy, dz, gripper]`` in [-1, 1]; state = EE position (3), EE quaternion
(4, w-x-y-z, sign nearest home), EE linear velocity (3), gripper opening (1), [wrench (6)], [object position (3)];
pixels = ``camera/<name>/image_raw`` frames, or the frames of a :class:`~robot_rl.cameras.CameraRig` (``rig``).

First safety layer (the safety node applies the same limits again): non-finite actions are replaced by the hold
action, actions are clipped to [-1, 1], the target pose is clipped to ``max_target_lead`` of the measured EE, to
``max_step`` per period and to the workspace box (:mod:`robot_rl.safety.limits`).

``step`` runs at a fixed rate: it publishes the target (``policy/target_pose``, ``policy/gripper``), sleeps to the
next period boundary and returns the newest synchronised observation (every state topic and camera frame picked
by nearest stamp to the reference stream once each has reached its stamp; ``info["obs_skew"]`` is the largest
stamp difference). ``reset`` opens the gripper, moves the arm home through the controller (in steps the safety
limits allow), waits until it has settled and the gripper has opened, and calls ``reset_service`` if set (the sim
hardware re-places the objects). Success comes from the ``success`` topic (``success_source="topic"``), a key
press (``"key"``: Enter on stdin; with a teleop device on the terminal, its Enter) or nowhere (``"none"``: a
profile's ``teleop`` and ``classifier`` sources are wrappers around the env, :data:`ENV_SUCCESS`).

The ROS 2 connection is made on the first ``reset``: building the env only to read its spaces (as the learner
does) touches no robot. Make it by config: ``env.id: robot_rl.envs.ros_env:robot_rl/RosArm-v0``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import register, registry

from robot_rl.cameras.base import wall_to_monotonic
from robot_rl.cameras.config import RigConfig
from robot_rl.cameras.rig import CameraRig, pixels_space
from robot_rl.config import from_dict
from robot_rl.envs.contract import PAUSED, RobotUnavailable
from robot_rl.envs.estop import EstopLatch
from robot_rl.envs.gripper_settle import GripperSettle
from robot_rl.envs.ros_env_config import FINGER_JOINTS, HOME_POS, RosArmEnvConfig  # noqa: F401  (re-exported)
from robot_rl.robots.future import roll_ee_target
from robot_rl.robots.profile import load_profile, with_overrides
from robot_rl.ros.bag import BagRecorder, arm_topics
from robot_rl.ros.profile_check import ProfileCheck
from robot_rl.safety.limits import ArmLimits, check_action, filter_arm_target

REANCHOR_M = 0.01
"""The target farther than ``max_target_lead`` plus this (m, on an axis) from the measured tool: the arm was moved by
something else, and the target restarts from where it is."""
ENV_SUCCESS = {"topic": "topic", "key": "key", "teleop": "none", "classifier": "none", "none": "none"}
"""A profile's ``success.source`` -> the env's own ``success_source``: a person's teleop button and the reward
classifier are wrappers around the env (the intervention wrapper, the learned reward), so the env itself reports no
success for them."""


class RosArmEnv(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": [], "render_fps": 20}
    drives_hardware = True  # the learner never evaluates on it (it would drive the robot beside the actor)

    def __init__(self, cfg: RosArmEnvConfig | None = None, render_mode: str | None = None, **overrides: Any) -> None:
        cfg = cfg or RosArmEnvConfig()
        if isinstance(overrides.get("limits"), dict):
            overrides["limits"] = ArmLimits(**overrides["limits"])
        if isinstance(overrides.get("rig"), dict):
            overrides["rig"] = from_dict(RigConfig, overrides["rig"], "rig")
        for key in ("cameras", "home_pos"):
            if key in overrides:
                overrides[key] = tuple(overrides[key])
        self.profile = None
        if overrides.get("profile") or cfg.profile:
            overrides = self._profile_defaults(dataclasses.replace(cfg, **overrides), overrides)
        self.cfg = dataclasses.replace(cfg, **overrides)
        self.cfg.validate()
        self.render_mode = None
        self.period = 1.0 / self.cfg.control_hz
        dim = 3 + 4 + 3 + 1 + 6 * self.cfg.include_wrench + 3 * self.cfg.object_state
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        spaces: dict[str, gym.Space] = {"state": gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)}
        if self.cfg.image_size > 0:
            size = (self.cfg.image_size, self.cfg.image_size, 3)
            spaces["pixels"] = gym.spaces.Dict({c: gym.spaces.Box(0, 255, size, np.uint8) for c in self.cfg.cameras})
        if self.cfg.rig is not None:
            spaces["pixels"] = pixels_space({c.name: c.output_shape() for c in self.cfg.rig.cameras})
        self.observation_space = gym.spaces.Dict(spaces)
        self.link = None
        self.rig: CameraRig | None = None
        self.rejections: dict[str, int] = {}
        self.overruns = 0
        self.reanchors = 0  # steps whose target restarted from the measured pose (the arm was moved by other means)
        self.steps = 0
        self.holding = False  # set for a held period by envs/held.py
        self.estop = EstopLatch(self.safety_state, self.cfg.estop_wait)
        self.target_pos = np.array(self.cfg.home_pos, np.float64)
        self.target_quat = np.array(self.cfg.limits.home_quat, np.float64)
        self.gripper = 1.0
        self._tick = 0.0
        self._obs_stamp = -math.inf  # the reference message the last observation was built from
        self._last_pose: tuple[float, np.ndarray] | None = None  # (stamp, position) of it (ee_velocity: step)
        self._key = threading.Event()
        self._terminal_to_teleop = False
        self.publish_times: list[float] = []
        self.recorder: Any = None  # robot_rl.ros.bag.BagRecorder with record_dir
        self.time_limit: int | None = None  # set by make_env: its TimeLimit wrapper's max_episode_steps
        self._episode_outcome: dict[str, Any] = {}

    def _profile_defaults(self, cfg: RosArmEnvConfig, given: dict[str, Any]) -> dict[str, Any]:
        """The env kwargs a robot profile decides: limits, home, cameras (as a camera rig), success source; no sim
        reset service and no object state unless the profile tracks an object."""
        profile = load_profile(cfg.profile, "arm")
        if cfg.profile_overrides:
            profile = with_overrides(profile, cfg.profile_overrides)
        for key in ("limits", "home_pos", "cameras", "success_source", "rig"):
            if key in given:
                raise ValueError(f"{key}: with a profile it comes from the profile (set it there or in "
                                 "profile_overrides)")
        self.profile = profile
        # the profile's cameras are ROS 2 cameras of robot_rl.cameras: read through the rig (crop, resize, sync)
        out = dict(given, limits=profile.limits, home_pos=tuple(profile.home_pos),
                   rig=RigConfig(cameras=tuple(profile.cameras)) if profile.cameras else None,
                   success_source=ENV_SUCCESS[profile.success.source])
        out.setdefault("reset_service", "")
        out.setdefault("object_state", bool(profile.objects))
        return out

    def check_robot(self) -> None:
        """Checks the profile against the live graph from a short-lived node (``robot-rl train``'s preflight, before
        any process starts); ``ConfigError`` naming the profile field. Without a profile: nothing to check."""
        if self.profile is None:
            return
        from robot_rl.ros.link import check_live  # optional: ros2 (imports rclpy)

        check_live(self.profile, self.cfg.namespace, self.cfg.use_sim_time, self.cfg.connect_timeout,
                   self.cfg.require_safety)

    # ------------------------------------------------------------------ ROS 2
    def _connect(self) -> None:
        # optional: ros2
        from geometry_msgs.msg import PoseStamped
        from std_msgs.msg import Bool, Float64, String

        from robot_rl.envs.ros_sources import ProfileSources, TopicSources  # optional: ros2 (imports rclpy)
        from robot_rl.ros.clock import NodeTime  # optional: ros2 (imports rclpy)
        from robot_rl.ros.link import RosLink  # optional: ros2 (imports rclpy)

        cfg = self.cfg
        link = RosLink("robot_env", cfg.namespace, use_sim_time=cfg.use_sim_time)
        self.clock = NodeTime(link.node, real=time.time)  # wall clock (the stamps'), or /clock with use_sim_time
        self.link = link
        cams = cfg.cameras if cfg.image_size > 0 else ()
        try:
            if self.profile is not None:  # nothing moves before the profile fits the live graph
                ProfileCheck(link.node, self.profile, cfg.connect_timeout).arm()
            self.sources = (ProfileSources(link, self.profile, cfg.include_wrench, cfg.object_state)
                            if self.profile is not None else
                            TopicSources(link, cfg.include_wrench, cfg.object_state, FINGER_JOINTS, cams))
        except Exception:
            self.close()
            raise
        if cfg.success_source == "topic":
            link.subscribe("success", Bool, self.sources.success_topic, lambda m: bool(m.data), stamped=False,
                           depth=4)
        link.subscribe("safety", String, "safety_state", lambda m: m.data, stamped=False, latched=True, depth=1)
        self._pub_target = link.publisher("target", PoseStamped, "policy/target_pose")
        self._pub_gripper = link.publisher("gripper", Float64, "policy/gripper")
        self._Float64 = Float64
        self.state_keys = self.sources.state_keys
        self.cam_keys = self.sources.cam_keys
        missing = link.wait_for(self.state_keys + self.cam_keys + ["safety"] * cfg.require_safety,
                                timeout=cfg.connect_timeout)
        if missing:
            self.close()
            raise TimeoutError(f"no messages on {missing} (namespace {cfg.namespace!r}): is the robot graph up?")
        try:
            self.sources.connect(cfg.connect_timeout)
        except Exception:
            self.close()
            raise
        # Commands sent before DDS discovery matched the safety node's inputs would be dropped silently.
        unheard = link.wait_subscribed(["target", "gripper"], timeout=cfg.connect_timeout) if cfg.require_safety else []
        if unheard:
            self.close()
            raise TimeoutError(f"nobody subscribes to {unheard} (namespace {cfg.namespace!r}): is the safety node up?")
        try:
            self.clock.wait_for_clock(cfg.connect_timeout)
        except TimeoutError:
            self.close()
            raise
        if cfg.rig is not None:
            try:
                # a camera node (re)started with its driver may send its first frame later than the joint states
                cams = tuple(dataclasses.replace(c, open_timeout=max(c.open_timeout, cfg.connect_timeout))
                             if c.open_timeout > 0 else c for c in cfg.rig.cameras)
                self.rig = CameraRig(dataclasses.replace(cfg.rig, cameras=cams)).start()
            except Exception:
                self.close()
                raise
        if cfg.success_source == "key" and not self._terminal_to_teleop:
            threading.Thread(target=self._read_keys, daemon=True).start()
        if cfg.record_dir:
            cams = cfg.cameras if cfg.image_size > 0 else ()
            raw = cams if cfg.record_images == "raw" else ()
            packed = tuple(self.sources.camera_topics.values()) if cfg.record_images == "compressed" else ()
            self.recorder = BagRecorder(link.node, arm_topics(raw), cfg.record_dir, compress=packed)

    def leave_terminal_to_teleop(self) -> None:
        """A teleop device reads this process's terminal (before the first reset): its success key (Enter) labels
        the episode through the intervention wrapper, so ``success_source: key`` reads no keys here."""
        self._terminal_to_teleop = True

    def _read_keys(self) -> None:
        for _ in sys.stdin:
            self._key.set()

    def _publish(self) -> None:
        from robot_rl.ros.msgs import pose_stamped  # optional: ros2 (ROS message packages)

        now = self.clock.now()
        self._pub_target.publish(pose_stamped(self.target_pos, self.target_quat, now))
        opening = self.cfg.limits.max_opening * 0.5 * (1.0 - self.gripper)
        self._pub_gripper.publish(self._Float64(data=float(opening)))
        self.publish_times.append(now)

    def _observe(self, after: float, frames_after: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The synchronised observation from messages stamped at or after ``after`` (the node's clock).
        ``frames_after`` (``time.monotonic()``): the rig's frames too, captured then or later (a reset's first
        observation: a camera's newest frame, tens of ms old, may still show the scene before the reset, which a
        real robot's slow reset hides and an instant one does not)."""
        ref = self.sources.reference()
        if not self.link.streams[ref].wait_newer(after, self.cfg.obs_timeout, than=self._obs_stamp):
            raise RobotUnavailable(f"no fresh {ref} within {self.cfg.obs_timeout} s (robot graph stalled?)")
        # Every topic of the reference's physics step carries its stamp, but topics are delivered independently:
        # the snapshot waits for all of them, or a stale object pose or twist gets paired in.
        snap, skew = self.link.snapshot(self.state_keys + self.cam_keys, ref, self.cfg.sync_slack,
                                        self.cfg.obs_timeout, self.sources.unsynced)
        parts, (pose_stamp, pos, quat) = self.sources.state(snap)
        if self.cfg.ee_velocity == "step":
            parts[2] = self._step_velocity(pose_stamp, pos)
        self._observed_pose = (pos, quat)
        if quat @ np.asarray(self.cfg.limits.home_quat) < 0:
            parts[1] = -quat
        obs: dict[str, Any] = {"state": np.concatenate(parts).astype(np.float32)}
        if self.cam_keys:
            obs["pixels"] = {k[4:]: snap[k][1] for k in self.cam_keys}
        self._obs_stamp = snap[ref][0]
        info = {"stamp": snap[ref][0], "obs_skew": skew}
        if self.recorder is not None:  # which messages this observation is made of: exact pairs in the bag's demos
            keys = self.state_keys + (self.cam_keys if self.rig is None else [])
            subs = self.link.subscriptions  # a stream fed from another's messages (TF, the joints') has no topic
            self.recorder.note_observation({subs[k].topic: round(snap[k][0] * 1e9) for k in keys if k in subs})
        if self.rig is not None:
            # The rig waits (up to its sync_timeout) for a set within its skew and staleness bounds and counts
            # the late cameras; its stamps are monotonic, the state's are wall clock.
            reading = self.rig.read(after=frames_after, timeout=None if frames_after is None else self.cfg.obs_timeout)
            obs["pixels"] = reading.pixels
            state_t = wall_to_monotonic(snap[ref][0])
            info["obs_skew"] = max(skew, *(abs(t - state_t) for t in reading.stamps.values()))
            info["camera_skew"], info["late_cameras"] = reading.skew, reading.late
        return obs, info

    def ee(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, quaternion, linear velocity) of the newest EE messages."""
        return self.sources.ee()

    def _step_velocity(self, stamp: float, pos: np.ndarray) -> np.ndarray:
        """The EE's mean velocity since the previous observation (``ee_velocity: step``): its displacement over the
        time between the two poses' stamps, which vary by milliseconds from one period to the next on a robot (a
        displacement over the nominal period would read them as speed); 0 on a reset's first observation."""
        last, self._last_pose = self._last_pose, (stamp, np.array(pos, np.float64))
        if last is None or not stamp > last[0]:
            return np.zeros(3)
        return (self._last_pose[1] - last[1]) / (stamp - last[0])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        if self.link is None:
            self._connect()
        self.estop.wait_reset()
        if self.recorder is not None and self.recorder.bag is not None:
            self.recorder.end_episode(**self._episode_outcome)  # the episode the caller ended by resetting
        self._move_home()
        if self.cfg.reset_service:
            from std_srvs.srv import Trigger  # optional: ros2

            self.link.call(Trigger, self.cfg.reset_service)
            # no target was sent during the call: a controller watchdog may have stopped the arm meanwhile
            self._move_home()
        self._key.clear()
        self.steps = 0
        if "success" in self.link.streams:  # only a success topic is subscribed
            self.link.streams["success"].clear()
        if self.recorder is not None:
            self.recorder.start_episode()  # from the settled start on: reset motion is not part of the episode
            self._episode_outcome = {"success": False, "terminated": False, "truncated": False}
        self._tick = self.clock.now()  # the first observation is stamped after this: its messages are in the bag
        self._obs_stamp = -math.inf  # a restarted driver's clock (sim time) may start again below the last stamp
        self._last_pose = None  # at rest after the reset: the first observation's step velocity is 0
        obs, info = self._observe(self._tick, frames_after=time.monotonic())
        # the first target is the pose the first observation shows (the first action moves from what was seen)
        self.target_pos, self.target_quat = (np.array(x, np.float64) for x in self._observed_pose)
        info["is_success"] = False
        return obs, info

    def _move_home(self) -> None:
        """Opens the gripper and steps the target home at the control rate until the arm has settled there."""
        home = np.asarray(self.cfg.home_pos, np.float64)
        lim = self.cfg.limits
        pos, _, _ = self.ee()
        self.target_pos = pos.copy()
        self.target_quat = np.asarray(lim.home_quat, np.float64)
        self.gripper = -1.0
        deadline = time.monotonic() + self.cfg.reset_timeout
        tick = self.clock.now()
        gripper = GripperSettle(lim.max_opening, self.cfg.settle_gripper, self.cfg.gripper_stall)
        while True:
            pos, _, vel = self.ee()
            opening = self.link.streams["gripper"].latest() if "gripper" in self.link.streams else None
            gripper_open = gripper.settled(time.monotonic(), None if opening is None else opening[1])
            if np.linalg.norm(pos - home) < self.cfg.settle_tolerance and \
                    np.linalg.norm(vel) < self.cfg.settle_speed and gripper_open:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"reset: arm did not settle at home within {self.cfg.reset_timeout} s "
                                   f"(at {np.round(pos, 3)}, gripper {gripper.last}; safety state "
                                   f"{self.safety_state()})")
            step = np.clip(home - self.target_pos, -lim.max_step, lim.max_step)
            self.target_pos = np.clip(self.target_pos + step, pos - lim.max_target_lead, pos + lim.max_target_lead)
            self._publish()
            tick += self.period
            self.clock.sleep_until(tick, self.cfg.obs_timeout)

    def halted(self) -> bool:
        """The safety node's e-stop is latched: every command is rejected, the robot holds (a held period)."""
        return self.estop.latched()

    def hold_action(self) -> np.ndarray:
        """Zero motion with the gripper command currently applied: the robot stays where it is."""
        hold = np.zeros(4, np.float32)
        hold[3] = self.gripper
        return hold

    def predict_state(self, state: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The state expected after ``actions [k, 4]`` from now (future-state-aware chunk execution): the EE
        position moved as this env's target moves (robot_rl.robots.future)."""
        lim = self.cfg.limits
        return roll_ee_target(state, actions, self.target_pos, lim.max_step, np.asarray(lim.workspace_low),
                              np.asarray(lim.workspace_high), lim.max_target_lead, self.period)

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        if self.link is None:
            raise RuntimeError("call reset() before step()")
        hold = self.hold_action()
        estop = self.halted()  # the safety node rejects every command: the period is held
        if estop:
            action = hold
        action, reasons = check_action(action, hold)
        pos, _, _ = self.ee()
        lim = self.cfg.limits
        if np.max(np.abs(self.target_pos - pos)) > lim.max_target_lead + REANCHOR_M:
            # the target is kept within the lead of the arm, so the arm was moved by something else (a hand, a
            # restarted driver): the measured pose is the truth, the action moves from it
            self.target_pos = np.array(pos, np.float64)
            self.reanchors += 1
        wanted = self.target_pos + action[:3].astype(np.float64) * lim.max_step
        self.target_pos, self.target_quat, more = filter_arm_target(
            lim, wanted, self.target_quat, None, None, pos)
        for r in reasons + more:
            self.rejections[r] = self.rejections.get(r, 0) + 1
        self.gripper = float(action[3])
        self._publish()
        self._tick, overran = self.clock.next_period(self._tick, self.period, self.cfg.obs_timeout)
        self.overruns += overran
        obs, info = self._observe(self._tick - 0.5 * self.period)
        success = self._success()
        if self.holding or estop:  # a held period (envs/held.py) is not one of the episode's steps, ends nothing
            terminated = truncated = False
        else:
            self.steps += 1
            terminated = bool(success and self.cfg.terminate_on_success)
            truncated = bool(self.steps >= self.episode_limit() and not terminated)
        info.update(is_success=success, rejected_actions=sum(self.rejections.values()), overruns=self.overruns,
                    safety_state=self.safety_state(), reanchors=self.reanchors)
        if estop:
            info[PAUSED] = True  # nothing to learn from: the actor records nothing
        if self.recorder is not None:
            self.recorder.steps = self.steps
            self._episode_outcome = {"success": success, "terminated": terminated, "truncated": truncated}
            if terminated or truncated:
                self.recorder.end_episode(**self._episode_outcome)
        return obs, float(success), terminated, truncated, info

    def episode_limit(self) -> int:
        """Steps per episode: ``max_episode_steps``, or the shorter time limit make_env wraps the env in
        (``time_limit``): the recorder must see the episode end where the wrapper ends it, or the bag is kept as
        aborted."""
        limit = self.cfg.max_episode_steps
        return min(limit, self.time_limit) if self.time_limit else limit

    def _success(self) -> bool:
        if self.cfg.success_source == "topic":
            item = self.link.streams["success"].latest()
            return bool(item and item[1])
        if self.cfg.success_source == "key":
            return self._key.is_set()
        return False

    def safety_state(self) -> str:
        item = self.link.streams["safety"].latest() if self.link is not None else None
        return item[1] if item else "unknown"

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()  # an episode still open is kept, marked aborted
            self.recorder = None
        if self.rig is not None:
            self.rig.stop()
            self.rig = None
        if self.link is not None:
            self.link.close()
            self.link = None


if "robot_rl/RosArm-v0" not in registry:
    register(id="robot_rl/RosArm-v0", entry_point="robot_rl.envs.ros_env:RosArmEnv", disable_env_checker=True)
