"""Recorded ROS 2 bags of an arm -> demo episodes, in RosArmEnv's observation and action layout (so a run
teleoperated with any ROS 2 tool becomes demos for the same policies).

Bags are read with ``rosbags`` (pure Python; any rosbag2 bag, MCAP or SQLite, from ``ros2 bag record`` or
RosArmEnv's own recorder). Every ``policy/target_pose`` message is one step. Its observation: in a bag RosArmEnv
recorded, the very ``ee_pose``, ``ee_twist``, ``gripper/joint_states`` (and ``object_pose``, cameras) messages the
env's observation was made of (the recorder notes their stamps on ``policy/observation_stamps``); in any other
bag, the newest of each logged before the command, as a subscriber would have seen them. The action is the
target's move since the previous one in units of ``limits.max_step`` (clipped to [-1, 1]; the first from the EE
position) and the gripper command recovered from the newest ``policy/gripper`` before the next target
(``opening = max_opening * (1 - g) / 2``). The last observation is the env's last one (or the newest state at the
end of the bag). Reward 1 on the step where ``success`` turns true; episodes end there when RosArmEnv's recorder
said so (``episodes.jsonl``), else at the bag's end (truncated).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.datasets.episodes import Episode
from robot_rl.ros.bag import OBSERVATION_TOPIC, stamp_ns
from robot_rl.safety.limits import ArmLimits
from robot_rl.spaces import ObsSpec

FINGERS = ("finger_left", "finger_right")


def topic_series(reader: Any, topic: str) -> tuple[np.ndarray, list[Any]]:
    """A bag's messages on ``topic`` (or on it under a namespace), deserialised, with their log times (ns), in
    log-time order (``reader``: an open rosbags ``AnyReader``)."""
    conns = [c for c in reader.connections if c.topic.rstrip("/").endswith("/" + topic) or c.topic == topic]
    if not conns:  # rosbags reads every message for an empty connection list: a topic not in the bag has none
        return np.zeros(0, np.int64), []
    items = [(t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages(connections=conns)]
    items.sort(key=lambda x: x[0])
    return np.array([t for t, _ in items], np.int64), [m for _, m in items]


def bags_in(folder: str | Path) -> list[Path]:
    """The rosbag2 bags at ``folder``: the folder itself when it holds a ``metadata.yaml``, else the bags one level
    down, in name order (none: an empty list)."""
    folder = Path(folder)
    if (folder / "metadata.yaml").is_file():
        return [folder]
    return sorted(p.parent for p in folder.glob("*/metadata.yaml"))


def one_bag(folder: str | Path, command: str) -> Path:
    """The one rosbag2 bag at ``folder`` (:func:`bags_in`): ``robot-rl record-excitation --out log`` writes
    ``log/episode_000000``, and a person passes either."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{command}: no bag at {folder}")
    inner = bags_in(folder)
    if len(inner) == 1:
        return inner[0]
    if inner:
        raise ValueError(f"{command}: {folder} holds {len(inner)} bags ({', '.join(p.name for p in inner[:4])}); "
                         "pass one of them")
    raise ValueError(f"{command}: {folder} is not a rosbag2 bag (no metadata.yaml in it or in a folder inside it)")


def _before(times: np.ndarray, t: int) -> int:
    """The newest message logged at or before ``t``; the first one when none was (the recorder may log the state
    an env stepped from a moment after the command it sent on it)."""
    return max(int(np.searchsorted(times, t, side="right")) - 1, 0)


def _header_stamps(msgs: list[Any]) -> np.ndarray:
    return np.array([stamp_ns(m.header.stamp) for m in msgs], np.int64)


def _nearest(stamps: np.ndarray, t: int) -> int:
    """The message whose header stamp is nearest to ``t`` (the recorder's note rounds the env's float stamp)."""
    return int(np.argmin(np.abs(stamps - int(t))))


def image_from_msg(m: Any) -> np.ndarray:
    """sensor_msgs Image (rgb8 / bgr8) or CompressedImage (JPEG / PNG) -> uint8 RGB [H, W, 3]."""
    if hasattr(m, "format"):
        import cv2  # optional: cameras

        bgr = cv2.imdecode(np.frombuffer(bytes(m.data), np.uint8), cv2.IMREAD_COLOR)
        return bgr[..., ::-1].copy()
    img = np.frombuffer(bytes(m.data), np.uint8).reshape(m.height, m.step)[:, : m.width * 3]
    img = img.reshape(m.height, m.width, 3)
    return img[..., ::-1].copy() if m.encoding == "bgr8" else img.copy()


def bag_episode(folder: str | Path, limits: ArmLimits | None = None, object_state: bool = True,
                cameras: tuple[str, ...] = (), outcome: dict[str, Any] | None = None) -> Episode:
    """One bag as an episode (see the module docstring)."""
    # optional: data
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    lim = limits or ArmLimits()
    home = np.asarray(lim.home_quat)
    with AnyReader([Path(folder)], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        cmd_t, cmds = topic_series(reader, "policy/target_pose")
        grip_t, grips = topic_series(reader, "policy/gripper")
        state = {k: topic_series(reader, k) for k in ("ee_pose", "ee_twist", "gripper/joint_states")}
        if object_state:
            state["object_pose"] = topic_series(reader, "object_pose")
        cams = {c: topic_series(reader, f"camera/{c}/image_raw") for c in cameras}
        cams = {c: v if len(v[0]) else topic_series(reader, f"camera/{c}/image_raw/compressed")
                for c, v in cams.items()}
        succ_t, succ = topic_series(reader, "success")
        notes = topic_series(reader, OBSERVATION_TOPIC)[1]
    if len(cmds) == 0:
        raise ValueError(f"{folder}: no policy/target_pose messages")
    for k, (times, _) in {**state, **{f"camera/{c}": v for c, v in cams.items()}}.items():
        if len(times) == 0:
            raise ValueError(f"{folder}: no {k} messages")

    def observe(pick: Callable[[str, np.ndarray], int]) -> dict[str, np.ndarray]:
        """The observation of the messages ``pick(topic, log times)`` chooses, one per topic."""
        def msg(topic: str, series: tuple[np.ndarray, list[Any]]) -> Any:
            return series[1][pick(topic, series[0])]

        pose = msg("ee_pose", state["ee_pose"]).pose
        pos = np.array([pose.position.x, pose.position.y, pose.position.z])
        quat = np.array([pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z])
        quat = -quat if quat @ home < 0 else quat
        lin = msg("ee_twist", state["ee_twist"]).twist.linear
        js = msg("gripper/joint_states", state["gripper/joint_states"])
        opening = sum(float(p) for n, p in zip(js.name, js.position) if n in FINGERS)
        parts = [pos, quat, [lin.x, lin.y, lin.z], [opening]]
        if object_state:
            o = msg("object_pose", state["object_pose"]).pose.position
            parts.append([o.x, o.y, o.z])
        out = {"state": np.concatenate(parts).astype(np.float32)}
        for c, series in cams.items():
            out[f"pixels/{c}"] = image_from_msg(msg(f"camera/{c}/image_raw", series))
        return out

    end = max(int(cmd_t[-1]), *(int(v[0][-1]) for v in state.values()))
    if len(notes) == len(cmds) + 1:  # RosArmEnv's recording: the very messages each observation was made of
        stamps = {k: _header_stamps(v[1]) for k, v in state.items()}
        stamps.update({f"camera/{c}/image_raw": _header_stamps(v[1]) for c, v in cams.items()})
        noted = [json.loads(m.data) for m in notes]
        obs = [observe(lambda topic, _, n=n: _nearest(stamps[topic], n.get(topic, n["ee_pose"]))) for n in noted]
    else:  # any other bag: the newest state logged before each command, as a subscriber would have seen it
        obs = [observe(lambda _, times, t=int(t): _before(times, t)) for t in [*cmd_t, end]]
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
    else:
        bags = [(p, {}) for p in bags_in(folder)]
    if not bags:
        raise FileNotFoundError(f"no rosbag2 bags under {folder}")

    def load() -> Iterator[Episode]:
        for path, outcome in bags:
            yield bag_episode(path, limits, object_state, cameras, outcome)

    first = bag_episode(bags[0][0], limits, object_state, cameras, bags[0][1])
    cams = {c: tuple(first.observations[f"pixels/{c}"].shape[1:]) for c in cameras}
    return ObsSpec(first.observations["state"].shape[1], cams), load()
