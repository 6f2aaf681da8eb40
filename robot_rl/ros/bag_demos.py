"""Recorded ROS 2 bags of an arm -> demo episodes, in RosArmEnv's observation and action layout (so a run
teleoperated with any ROS 2 tool becomes demos for the same policies).

Bags are read with ``rosbags`` (pure Python; any rosbag2 bag, MCAP or SQLite, from ``ros2 bag record`` or
RosArmEnv's own recorder). Every ``policy/target_pose`` message is one step: the observation is the newest
``ee_pose``, ``ee_twist``, ``gripper/joint_states`` (and ``object_pose``, cameras) logged before it, as RosArmEnv
would have seen them; the action is the target's move since the previous one in units of ``limits.max_step``
(clipped to [-1, 1]; the first from the EE position) and the gripper command recovered from the newest
``policy/gripper`` before the next target (``opening = max_opening * (1 - g) / 2``). The last observation is the
newest state at the end of the bag. Reward 1 on the step where ``success`` turns true; episodes end there when
RosArmEnv's recorder said so (``episodes.jsonl``), else at the bag's end (truncated).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.datasets.episodes import Episode
from robot_rl.safety.limits import ArmLimits
from robot_rl.spaces import ObsSpec

FINGERS = ("finger_left", "finger_right")


def _series(reader: Any, topic: str) -> tuple[np.ndarray, list[Any]]:
    conns = [c for c in reader.connections if c.topic.rstrip("/").endswith("/" + topic) or c.topic == topic]
    items = [(t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages(connections=conns)]
    items.sort(key=lambda x: x[0])
    return np.array([t for t, _ in items], np.int64), [m for _, m in items]


def _before(times: np.ndarray, t: int) -> int:
    """The newest message logged at or before ``t``; the first one when none was (the recorder may log the state
    an env stepped from a moment after the command it sent on it)."""
    return max(int(np.searchsorted(times, t, side="right")) - 1, 0)


def _image(m: Any) -> np.ndarray:
    """sensor_msgs Image (rgb8 / bgr8) or CompressedImage (JPEG / PNG) -> uint8 RGB [H, W, 3]."""
    if hasattr(m, "format"):
        import cv2

        bgr = cv2.imdecode(np.frombuffer(bytes(m.data), np.uint8), cv2.IMREAD_COLOR)
        return bgr[..., ::-1].copy()
    img = np.frombuffer(bytes(m.data), np.uint8).reshape(m.height, m.step)[:, : m.width * 3]
    img = img.reshape(m.height, m.width, 3)
    return img[..., ::-1].copy() if m.encoding == "bgr8" else img.copy()


def bag_episode(folder: str | Path, limits: ArmLimits | None = None, object_state: bool = True,
                cameras: tuple[str, ...] = (), outcome: dict[str, Any] | None = None) -> Episode:
    """One bag as an episode (see the module docstring)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    lim = limits or ArmLimits()
    home = np.asarray(lim.home_quat)
    with AnyReader([Path(folder)], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        cmd_t, cmds = _series(reader, "policy/target_pose")
        grip_t, grips = _series(reader, "policy/gripper")
        state = {k: _series(reader, k) for k in ("ee_pose", "ee_twist", "gripper/joint_states")}
        if object_state:
            state["object_pose"] = _series(reader, "object_pose")
        cams = {c: _series(reader, f"camera/{c}/image_raw") for c in cameras}
        cams = {c: v if len(v[0]) else _series(reader, f"camera/{c}/image_raw/compressed") for c, v in cams.items()}
        succ_t, succ = _series(reader, "success")
    if len(cmds) == 0:
        raise ValueError(f"{folder}: no policy/target_pose messages")
    for k, (times, _) in {**state, **{f"camera/{c}": v for c, v in cams.items()}}.items():
        if len(times) == 0:
            raise ValueError(f"{folder}: no {k} messages")

    def observe(t: int) -> dict[str, np.ndarray]:
        pose = state["ee_pose"][1][_before(state["ee_pose"][0], t)].pose
        pos = np.array([pose.position.x, pose.position.y, pose.position.z])
        quat = np.array([pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z])
        quat = -quat if quat @ home < 0 else quat
        lin = state["ee_twist"][1][_before(state["ee_twist"][0], t)].twist.linear
        js = state["gripper/joint_states"][1][_before(state["gripper/joint_states"][0], t)]
        opening = sum(float(p) for n, p in zip(js.name, js.position) if n in FINGERS)
        parts = [pos, quat, [lin.x, lin.y, lin.z], [opening]]
        if object_state:
            o = state["object_pose"][1][_before(state["object_pose"][0], t)].pose.position
            parts.append([o.x, o.y, o.z])
        out = {"state": np.concatenate(parts).astype(np.float32)}
        for c, (times, msgs) in cams.items():
            out[f"pixels/{c}"] = _image(msgs[_before(times, t)])
        return out

    obs = [observe(int(t)) for t in cmd_t]
    end = max(int(cmd_t[-1]), *(int(v[0][-1]) for v in state.values()))
    obs.append(observe(end))
    targets = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z] for m in cmds])
    previous = np.vstack([obs[0]["state"][None, :3], targets[:-1]])
    actions = np.zeros((len(cmds), 4), np.float32)
    actions[:, :3] = np.clip((targets - previous) / lim.max_step, -1, 1)
    for k in range(len(cmd_t)):  # the gripper command sent with the target: the newest before the next target
        upto = cmd_t[k + 1] if k + 1 < len(cmd_t) else np.iinfo(np.int64).max
        i = int(np.searchsorted(grip_t, upto, side="left")) - 1
        opening = float(grips[max(i, 0)].data) if len(grips) else 0.0
        actions[k, 3] = np.clip(1.0 - 2.0 * opening / lim.max_opening, -1, 1)
    reward = np.zeros(len(cmds), np.float32)
    true_times = succ_t[[bool(m.data) for m in succ]] if len(succ) else np.zeros(0, np.int64)
    if len(true_times):
        k = int(np.searchsorted(cmd_t, true_times[0], side="left")) - 1
        reward[min(max(k, 0), len(cmds) - 1)] = 1.0
    outcome = outcome or {}
    success = bool(outcome.get("success", reward.any()))
    terminated = np.zeros(len(cmds), bool)
    truncated = np.zeros(len(cmds), bool)
    terminated[-1] = bool(outcome.get("terminated", False))
    truncated[-1] = not terminated[-1]
    flat = {k: np.stack([o[k] for o in obs]) for k in obs[0]}
    return Episode(episode_id=int(outcome.get("episode", 0)), observations=flat, action=actions, reward=reward,
                   terminated=terminated, truncated=truncated, intervened=np.zeros(len(cmds), bool),
                   source=["demo"] * len(cmds), success=success)


def bag_episodes(folder: str | Path, limits: ArmLimits | None = None, object_state: bool = True,
                 cameras: tuple[str, ...] = ()) -> tuple[ObsSpec, Iterator[Episode]]:
    """Every bag under ``folder`` (a RosArmEnv record_dir with ``episodes.jsonl``, or a folder of bags, or one
    bag) as episodes, in order."""
    folder = Path(folder)
    index = folder / "episodes.jsonl"
    if index.is_file():
        lines = [json.loads(x) for x in index.read_text().splitlines() if x.strip()]
        bags = [(folder / e["bag"], e) for e in lines if not e.get("aborted")]
    elif (folder / "metadata.yaml").is_file():
        bags = [(folder, {})]
    else:
        bags = [(p.parent, {}) for p in sorted(folder.glob("*/metadata.yaml"))]
    if not bags:
        raise FileNotFoundError(f"no rosbag2 bags under {folder}")

    def load() -> Iterator[Episode]:
        for path, outcome in bags:
            yield bag_episode(path, limits, object_state, cameras, outcome)

    first = bag_episode(bags[0][0], limits, object_state, cameras, bags[0][1])
    cams = {c: tuple(first.observations[f"pixels/{c}"].shape[1:]) for c in cameras}
    return ObsSpec(first.observations["state"].shape[1], cams), load()
