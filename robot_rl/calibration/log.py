"""What calibration reads of a robot log: the commands sent to the arm's joint position controller and the joint
states the driver published, each with the time it was logged, from a rosbag2 bag (MCAP or SQLite, read with
``rosbags``; ``robot-rl record-excitation`` writes one, ``ros2 bag record`` of the same topics does too)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.datasets.bag_demos import image_from_msg, one_bag, topic_series
from robot_rl.robots.profile import ArmProfile


@dataclass
class DriverLog:
    """One bag's arm traffic, times in seconds on the logging machine's clock."""

    command_t: np.ndarray
    """[N] when each joint position command was logged (the recorder hears it as the driver does)."""
    command_q: np.ndarray
    """[N, J] the commanded joint positions, in the profile's joint order."""
    state_stamp: np.ndarray
    """[M] each joint state's header stamp (the time of the physics state it describes)."""
    state_t: np.ndarray
    """[M] when each joint state was logged."""
    state_q: np.ndarray
    """[M, J] arm joint positions."""
    state_qd: np.ndarray
    """[M, J] arm joint velocities."""
    state_effort: np.ndarray
    """[M, J] arm joint efforts (NaN where a state has none)."""
    opening: np.ndarray
    """[M] the gripper's opening (m: the fingers' positions summed; NaN where the state has no fingers)."""
    gripper_t: np.ndarray
    """[K] when each gripper command was logged."""
    gripper_opening: np.ndarray
    """[K] the commanded opening (m)."""

    @property
    def seconds(self) -> float:
        return float(self.state_stamp[-1] - self.state_stamp[0]) if len(self.state_stamp) > 1 else 0.0

    def window(self, start: float, end: float) -> DriverLog:
        """The part of the log between ``start`` and ``end`` s after its first joint state."""
        t0 = self.state_stamp[0]
        s = (self.state_stamp >= t0 + start) & (self.state_stamp < t0 + end)
        c = (self.command_t >= t0 + start - 1.0) & (self.command_t < t0 + end)
        g = (self.gripper_t >= t0 + start - 1.0) & (self.gripper_t < t0 + end)
        return DriverLog(self.command_t[c], self.command_q[c], self.state_stamp[s], self.state_t[s], self.state_q[s],
                         self.state_qd[s], self.state_effort[s], self.opening[s], self.gripper_t[g],
                         self.gripper_opening[g])


def read_bag(folder: str | Path, profile: ArmProfile) -> DriverLog:
    """The arm traffic of ``profile``'s topics in the bag at ``folder``: its joint position commands (the
    ``command.topic``; the profile must command joint positions), its joint states and, with a ``forward`` gripper,
    the gripper commands."""
    from rosbags.highlevel import AnyReader  # optional: data

    if profile.command.interface != "joint_position":
        raise ValueError(f"calibrate: profile {profile.name} commands {profile.command.interface}; calibration "
                         "replays joint position commands (a joint_position profile of the same arm)")
    folder = one_bag(folder, "calibrate")
    names = list(profile.joint_states.names)
    fingers = list(profile.gripper.joints)
    with AnyReader([folder]) as reader:
        command_t, commands = topic_series(reader, profile.command.topic)
        state_t, states = topic_series(reader, profile.joint_states.topic)
        grip_t, grips = (topic_series(reader, profile.gripper.command) if profile.gripper.interface == "forward"
                         else (np.zeros(0, np.int64), []))
    if len(commands) < 10 or len(states) < 100:
        raise ValueError(f"calibrate: {folder} has {len(commands)} messages on {profile.command.topic} and "
                         f"{len(states)} on {profile.joint_states.topic}; record a few minutes of both")
    rows = []
    for t, msg in zip(state_t, states, strict=True):
        index = {n: i for i, n in enumerate(msg.name)}
        if not all(n in index for n in names):
            continue
        arm = [index[n] for n in names]
        opening = (sum(msg.position[index[f]] for f in fingers)
                   if fingers and all(f in index for f in fingers) else np.nan)
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        rows.append((stamp, t * 1e-9, np.asarray(msg.position, np.float64)[arm],
                     np.asarray(msg.velocity, np.float64)[arm] if len(msg.velocity) else np.zeros(len(arm)), opening,
                     np.asarray(msg.effort, np.float64)[arm] if len(msg.effort) == len(msg.name)
                     else np.full(len(arm), np.nan)))
    if len(rows) < 100:
        raise ValueError(f"calibrate: the joint states in {folder} do not name the profile's joints {names}")
    rows.sort(key=lambda r: r[0])
    return DriverLog(
        command_t=command_t * 1e-9, command_q=np.array([np.asarray(m.data, np.float64) for m in commands]),
        state_stamp=np.array([r[0] for r in rows]), state_t=np.array([r[1] for r in rows]),
        state_q=np.array([r[2] for r in rows]), state_qd=np.array([r[3] for r in rows]),
        state_effort=np.array([r[5] for r in rows]),
        opening=np.array([r[4] for r in rows], np.float64),
        gripper_t=grip_t * 1e-9,
        gripper_opening=np.array([2.0 * float(np.mean(m.data)) for m in grips]))  # each finger: half


def read_images(folder: str | Path, topic: str) -> list[tuple[float, float, np.ndarray]]:
    """The bag's frames on ``topic`` (``sensor_msgs/Image``) as (header stamp s, logged s, uint8 RGB image)."""
    from rosbags.highlevel import AnyReader  # optional: data

    with AnyReader([one_bag(folder, "calibrate")]) as reader:
        times, msgs = topic_series(reader, topic)
        return [(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, t * 1e-9, image_from_msg(m))
                for t, m in zip(times, msgs, strict=True)]


def opening_speed(t: np.ndarray, opening: np.ndarray, command_t: np.ndarray, least: float = 0.01) -> float:
    """The gripper's speed (m/s of opening): the median over its commands (at ``command_t``) of how fast the opening
    crossed the middle 60 % of its change until the next command (changes under ``least`` m are left out). The middle
    of each stroke only: a single sample's stamp jitter or the fingers shaken by the arm do not count, as they did in
    the fastest change over a window (0.069 m/s on one log of a 0.05 m/s gripper)."""
    ok = np.isfinite(opening)
    t, w = t[ok], opening[ok]
    ends = np.r_[np.asarray(command_t, dtype=float)[1:], np.inf]
    speeds = []
    for start, end in zip(command_t, ends, strict=True):
        s = (t >= start) & (t < end)
        if s.sum() < 10 or abs(w[s][-1] - w[s][0]) < least:
            continue
        ts, share = t[s], (w[s] - w[s][0]) / (w[s][-1] - w[s][0])
        t20, t80 = ts[np.argmax(share >= 0.2)], ts[np.argmax(share >= 0.8)]
        if t80 > t20:
            speeds.append(0.6 * abs(w[s][-1] - w[s][0]) / (t80 - t20))
    return float(np.median(speeds)) if speeds else 0.0
