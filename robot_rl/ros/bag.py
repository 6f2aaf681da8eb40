"""rosbag2 bags in MCAP (the ROS 2 Jazzy default storage), written without the rosbag2 C++ stack: what ``ros2 bag
play``, ``ros2 bag info`` and Foxglove open.

A bag is a folder with ``metadata.yaml`` (rosbag2's bag information, version 9) and one ``.mcap`` file whose
channels carry CDR-serialised messages with ``ros2msg`` schemas (each type's definition with its dependencies, as
rosbag2 writes them). :class:`BagWriter` takes serialised messages (from an rclpy raw subscription, or
``rclpy.serialization.serialize_message``); :class:`BagRecorder` subscribes to topics on a node and writes one bag
per episode under a folder, with ``episodes.jsonl`` indexing them (episode, bag, steps, success, start/end).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robot_rl.utils.disk import describe, disk_full_error

BUILTIN = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
           "int64", "uint64", "string", "wstring"}
SEPARATOR = "=" * 80
DEPTH = 2000
"""Recorder queue depth per topic (4 s of a 500 Hz state topic)."""
IMAGE_DEPTH = 60
"""Recorder queue depth per camera topic (2 s at 30 fps)."""
OBSERVATION_TOPIC = "policy/observation_stamps"
"""Written by RosArmEnv's recorder: the header stamps of the messages each observation was made of."""


@functools.cache
def _share_dirs() -> list[Path]:
    dirs = [Path(sys.prefix) / "share"]
    try:
        from ament_index_python.packages import get_packages_with_prefixes  # optional: ros2

        dirs += [Path(p) / "share" for p in set(get_packages_with_prefixes().values())]
    except Exception:  # noqa: BLE001 - no ament index: the environment's share folder only
        pass
    return dirs


def _msg_text(full: str) -> str:
    pkg, _, name = full.partition("/msg/") if "/msg/" in full else full.partition("/")
    for share in _share_dirs():
        path = share / pkg / "msg" / f"{name}.msg"
        if path.is_file():
            return path.read_text()
    raise FileNotFoundError(f"no message definition for {full} (looked for {pkg}/msg/{name}.msg under "
                            f"{[str(d) for d in _share_dirs()]})")


def _dependencies(text: str, pkg: str) -> list[str]:
    """The message types a definition's fields use (constants and builtin fields are skipped)."""
    out = []
    for line in text.splitlines():
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        kind = re.sub(r"(<=\d+)?(\[[^\]]*\])?$", "", tokens[0])
        kind = re.sub(r"<=\d+$", "", kind)
        if kind in BUILTIN:
            continue
        out.append(kind if "/" in kind else ("std_msgs/Header" if kind == "Header" else f"{pkg}/{kind}"))
    return out


def msgdef(type_name: str) -> str:
    """``pkg/msg/Type``'s ``ros2msg`` schema: its .msg text, then every type it uses (depth-first, once), each
    after a separator line and ``MSG: pkg/Type``."""
    pkg = type_name.split("/")[0]
    parts, seen = [_msg_text(type_name)], set()
    stack = _dependencies(parts[0], pkg)
    while stack:
        dep = stack.pop(0)
        if dep in seen:
            continue
        seen.add(dep)
        text = _msg_text(dep)
        parts.append(f"{SEPARATOR}\nMSG: {dep}\n{text}")
        stack = _dependencies(text, dep.split("/")[0]) + stack
    return "\n".join(p.rstrip("\n") for p in parts) + "\n"


class BagWriter:
    """One rosbag2 bag (folder) in MCAP. ``write(topic, type_name, cdr, t_ns)``; ``close()`` writes
    ``metadata.yaml``. Crash: the .mcap is readable up to its last complete chunk (no metadata.yaml yet)."""

    def __init__(self, folder: str | Path, distro: str = "jazzy") -> None:
        from mcap.writer import CompressionType, Writer  # optional: data

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=False)
        self.file = self.folder / f"{self.folder.name}_0.mcap"
        try:
            self._stream = open(self.file, "wb")  # noqa: SIM115 - closed in close()
            self._writer = Writer(self._stream, compression=CompressionType.ZSTD)
            self._writer.start(profile="ros2", library="robot_rl")
        except BaseException:  # e.g. a full disk: the folder this made goes, nothing half-made stays
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.distro = distro
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, tuple[int, str]] = {}
        self._counts: dict[str, int] = {}
        self._first = self._last = None
        self._lock = threading.Lock()
        self.closed = False

    def _channel(self, topic: str, type_name: str) -> int:
        if topic not in self._channels:
            if type_name not in self._schemas:
                self._schemas[type_name] = self._writer.register_schema(type_name, "ros2msg",
                                                                        msgdef(type_name).encode())
            cid = self._writer.register_channel(topic, "cdr", self._schemas[type_name],
                                                {"offered_qos_profiles": ""})
            self._channels[topic] = (cid, type_name)
            self._counts[topic] = 0
        return self._channels[topic][0]

    def write(self, topic: str, type_name: str, cdr: bytes, t_ns: int, publish_ns: int | None = None) -> None:
        with self._lock:
            if self.closed:
                return
            cid = self._channel(topic, type_name)
            self._writer.add_message(cid, log_time=t_ns, data=bytes(cdr), publish_time=publish_ns or t_ns,
                                     sequence=self._counts[topic])
            self._counts[topic] += 1
            self._first = t_ns if self._first is None else min(self._first, t_ns)
            self._last = t_ns if self._last is None else max(self._last, t_ns)

    def abort(self) -> None:
        """Drops the bag: its folder is removed (a bag that could not be finished, e.g. on a full disk)."""
        with self._lock:
            self.closed = True
            try:
                self._stream.close()
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)

    def close(self, custom: dict[str, str] | None = None) -> Path:
        with self._lock:
            if self.closed:
                return self.folder
            self.closed = True
            self._writer.finish()
            self._stream.close()
        start = self._first or time.time_ns()
        duration = (self._last or start) - start
        total = sum(self._counts.values())
        info = {"version": 9, "storage_identifier": "mcap", "duration": {"nanoseconds": duration},
                "starting_time": {"nanoseconds_since_epoch": start}, "message_count": total,
                "topics_with_message_count": [
                    {"topic_metadata": {"name": t, "type": self._channels[t][1], "serialization_format": "cdr",
                                        "offered_qos_profiles": "", "type_description_hash": ""},
                     "message_count": n} for t, n in self._counts.items()],
                "compression_format": "", "compression_mode": "", "relative_file_paths": [self.file.name],
                "files": [{"path": self.file.name, "starting_time": {"nanoseconds_since_epoch": start},
                           "duration": {"nanoseconds": duration}, "message_count": total}],
                "custom_data": dict(custom or {}), "ros_distro": self.distro}
        (self.folder / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": info},
                                                                  sort_keys=False))
        return self.folder


class BagRecorder:
    """Records ``topics`` (name -> message class) heard on ``node`` into one bag per episode under ``folder``.

    ``start_episode()`` opens ``episode_<k>`` (k = 0, 1, ... continuing an existing folder) and
    ``end_episode(**info)`` closes it and appends a line to ``episodes.jsonl``. Messages arrive as serialised
    bytes (raw subscriptions: nothing is deserialised to record them). A full disk pauses the recording with one
    message: the episode's unfinished bag is removed (the finished ones stay whole) and the next
    ``start_episode()`` records again once there is space."""

    def __init__(self, node: Any, topics: dict[str, type], folder: str | Path, qos: Any = None,
                 compress: tuple[str, ...] = (), jpeg_quality: int = 90,
                 gates: dict[str, Callable[[], bool]] | None = None) -> None:
        """``qos``: one profile or depth for every topic; by default a deep queue (``DEPTH`` messages, ``IMAGE_DEPTH``
        frames), so a recorder whose executor falls behind (a loaded machine) logs late rather than losing
        messages. ``gates``: topic -> a function called as each message arrives; it is recorded only when that says
        so (a camera's frames only while the arm is held, say)."""
        self.gates = dict(gates or {})
        self.node, self.folder = node, Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.index = self.folder / "episodes.jsonl"
        done = self.index.read_text().splitlines() if self.index.is_file() else []
        # past the indexed episodes and any folder a crashed session left (its .mcap stays readable: kept)
        folders = [int(p.name.split("_")[1]) for p in self.folder.glob("episode_*") if p.name.split("_")[1].isdigit()]
        self.next_episode = max([json.loads(line)["episode"] for line in done] + folders, default=-1) + 1
        self.paused = False
        """Recording paused by a full disk (said once); the next start_episode() tries again."""
        self._lock = threading.Lock()  # self.bag is swapped by the env's thread and the executor's callbacks
        self.bag: BagWriter | None = None
        self.steps = 0
        self.flush_timeout = 1.0
        """How long ``end_episode`` waits for the messages of the last noted observation to be logged."""
        self._subs: list[Any] = []
        self._raw: list[tuple[Any, str, str]] = []  # (subscription, topic, type name) of the raw ones
        self._recorded = set(topics) | set(compress)
        self._seen: dict[str, int] = {}  # topic -> newest header stamp logged (ns)
        self._noted: dict[str, int] = {}
        self._heard: set[str] = set()  # topics whose first message was logged (the operator sees what flows)
        for topic, cls in topics.items():
            type_name = _type_name(cls)
            depth = qos or (IMAGE_DEPTH if type_name == "sensor_msgs/msg/Image" else DEPTH)
            sub = node.create_subscription(cls, topic, lambda data, t=topic, n=type_name: self._on(t, n, data), depth,
                                           raw=True)
            self._subs.append(sub)
            self._raw.append((sub, topic, type_name))
        self.jpeg_quality = jpeg_quality
        for topic in compress:  # sensor_msgs/Image -> JPEG sensor_msgs/CompressedImage on <topic>/compressed
            from sensor_msgs.msg import Image  # optional: ros2

            self._subs.append(node.create_subscription(Image, topic, lambda m, t=topic: self._compress(t, m),
                                                       qos or IMAGE_DEPTH))

    def heard(self, topic: str) -> bool:
        """Whether a message on ``topic`` (as given to the recorder) has arrived: its subscription is matched."""
        return topic in self._heard

    def _on(self, topic: str, type_name: str, data: bytes, t_ns: int | None = None) -> None:
        if topic not in self._heard:
            self._heard.add(topic)
            self.node.get_logger().info(f"first message on {self.node.resolve_topic_name(topic)}")
        bag = self.bag
        gate = self.gates.get(topic)
        if bag is not None and (gate is None or gate()):
            if not self._write(bag, self.node.resolve_topic_name(topic), type_name, data, t_ns or time.time_ns()):
                return
            if topic in self._noted:
                self._seen[topic] = max(self._seen.get(topic, 0), _header_stamp_ns(data))

    def _compress(self, topic: str, msg: Any) -> None:
        import cv2  # optional: cameras
        bag = self.bag
        if bag is None:
            return
        from robot_rl.ros.msgs import image_array  # optional: ros2 (ROS message packages)

        ok, jpeg = cv2.imencode(".jpg", image_array(msg)[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, self.jpeg_quality])
        if not ok:
            return
        store = _typestore()  # CDR from rosbags' serialiser (rclpy's pads its buffer)
        t = store.types
        header = t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=msg.header.stamp.sec,
                                                                               nanosec=msg.header.stamp.nanosec),
                                          frame_id=msg.header.frame_id)
        out = t["sensor_msgs/msg/CompressedImage"](header=header, format="rgb8; jpeg compressed bgr8",
                                                  data=np.frombuffer(jpeg.tobytes(), np.uint8))
        cdr = store.serialize_cdr(out, "sensor_msgs/msg/CompressedImage")
        if not self._write(bag, self.node.resolve_topic_name(topic) + "/compressed",
                           "sensor_msgs/msg/CompressedImage", bytes(cdr), time.time_ns()):
            return
        self._seen[topic] = max(self._seen.get(topic, 0), stamp_ns(msg.header.stamp))

    def note_observation(self, stamps_ns: dict[str, int]) -> None:
        """Logs which messages the env's observation was made of (``OBSERVATION_TOPIC``: a ``std_msgs/String`` of
        JSON, topic -> header stamp in ns), written into the bag directly when the env returns the observation: the
        bag's reader pairs each command with the exact state it was computed from, not just the newest logged."""
        bag = self.bag
        if bag is None:
            return
        self._noted = {t: s for t, s in stamps_ns.items() if t in self._recorded}
        store = _typestore()
        msg = store.types["std_msgs/msg/String"](data=json.dumps(stamps_ns, sort_keys=True))
        cdr = store.serialize_cdr(msg, "std_msgs/msg/String")
        self._write(bag, self.node.resolve_topic_name(OBSERVATION_TOPIC), "std_msgs/msg/String", bytes(cdr),
                    time.time_ns())

    def _write(self, bag: BagWriter, *message: Any) -> bool:
        """``bag.write(*message)``; on a full disk the recording pauses (see the class) and False comes back."""
        try:
            bag.write(*message)
            return True
        except OSError as exc:
            self._disk_full(exc, bag)
            return False

    def _disk_full(self, exc: BaseException, bag: BagWriter | None) -> None:
        err = disk_full_error(exc)
        if err is None:
            raise exc
        with self._lock:
            if bag is not None:
                if self.bag is not bag:  # the other thread already handled this bag
                    return
                self.bag = None
                bag.abort()
            said, self.paused = self.paused, True
        if not said:
            self.node.get_logger().error(
                f"recording paused: the disk is full ({describe(err)}); the unfinished bag of this episode was "
                "removed, the finished ones are whole; the next episode records again once there is space")

    def drain(self) -> int:
        """Logs the messages still queued in the subscriptions (at the end of a session the executor has stopped;
        under load it runs behind), each at the time DDS received it; returns how many."""
        count = 0
        for sub, topic, type_name in self._raw:
            with sub.handle:
                while (taken := sub.handle.take_message(sub.msg_type, sub.raw)) is not None:
                    data, info = taken
                    self._on(topic, type_name, data, int(info.get("received_timestamp", 0)) or None)
                    count += 1
        return count

    def start_episode(self) -> int:
        if self.bag is not None:
            self.end_episode(aborted=True)
        k = self.next_episode
        try:
            bag = BagWriter(self.folder / f"episode_{k:06d}")
        except OSError as exc:
            self._disk_full(exc, None)  # (BagWriter removed the folder it had made)
        else:
            with self._lock:
                self.bag = bag
            if self.paused:
                self.paused = False
                self.node.get_logger().info(f"recording resumed: episode {k}")
        self._episode, self._started, self.steps = k, time.time_ns(), 0
        self.next_episode += 1
        return k

    def end_episode(self, **info: Any) -> None:
        """Closes the episode's bag with every message queued for the recorder in it (its callbacks may run
        behind the env), waiting up to ``flush_timeout`` for the messages of the last noted observation."""
        deadline = time.monotonic() + self.flush_timeout
        while self.bag is not None:
            self.drain()
            if all(self._seen.get(t, -1) >= s for t, s in self._noted.items()) or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        self._noted, self._seen = {}, {}
        with self._lock:
            bag, self.bag = self.bag, None
        if bag is None:
            return
        try:
            bag.close({"robot_rl.episode": str(self._episode)})
        except OSError as exc:
            with self._lock:
                self.bag = bag
            self._disk_full(exc, bag)
            return
        line = {"episode": self._episode, "bag": bag.folder.name, "start_ns": self._started, "end_ns": time.time_ns(),
                "steps": self.steps, **info}
        with open(self.index, "a") as f:
            f.write(json.dumps(line) + "\n")

    def close(self) -> None:
        if self.bag is not None:
            self.end_episode(aborted=True)
        for sub in self._subs:
            self.node.destroy_subscription(sub)
        self._subs.clear()


@functools.cache
def _typestore() -> Any:
    """rosbags' Jazzy type store (building one takes milliseconds: once per process, not per message)."""
    from rosbags.typesys import Stores, get_typestore  # optional: data

    return get_typestore(Stores.ROS2_JAZZY)


def _header_stamp_ns(cdr: bytes) -> int:
    """The ``header.stamp`` of a serialised message whose first field is a std_msgs/Header (CDR: 4 bytes of
    encapsulation, then int32 sec and uint32 nanosec in the byte order it names); 0 for one too short."""
    if len(cdr) < 12:
        return 0
    sec, nanosec = struct.unpack_from("<iI" if cdr[1] == 1 else ">iI", cdr, 4)
    return sec * 1_000_000_000 + nanosec


def stamp_ns(stamp: Any) -> int:
    """A builtin_interfaces/Time (rclpy's or rosbags') in integer nanoseconds."""
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _type_name(cls: type) -> str:
    """``sensor_msgs.msg.JointState`` -> ``sensor_msgs/msg/JointState``."""
    module = cls.__module__.split(".")
    return f"{module[0]}/msg/{cls.__name__}"


def arm_topics(cameras: tuple[str, ...] = ()) -> dict[str, type]:
    """What a RosArmEnv records (relative names, resolved in the env's namespace)."""
    # optional: ros2
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Bool, Float64, String

    topics: dict[str, type] = {
        "policy/target_pose": PoseStamped, "policy/gripper": Float64,  # the policy's command
        "controller/target_pose": PoseStamped, "controller/gripper": Float64,  # what the safety node let through
        "safety_state": String, "joint_states": JointState, "gripper/joint_states": JointState,
        "ee_pose": PoseStamped, "ee_twist": TwistStamped, "object_pose": PoseStamped, "success": Bool,
        "/diagnostics": DiagnosticArray}
    topics.update({f"camera/{c}/image_raw": Image for c in cameras})
    return topics


def main(argv: list[str] | None = None) -> int:
    """The ``bag_recorder`` node (launch/record_arm.launch.yaml): records an arm's topics (:func:`arm_topics`) in its
    namespace into one bag under the ``record_dir`` parameter until it is stopped (SIGINT / SIGTERM: the bag is
    closed cleanly). Parameters: ``record_dir``, ``cameras`` (names), ``record_images`` (raw, compressed, none)."""
    from rclpy.node import Node  # optional: ros2

    from robot_rl.ros.node import run_node  # optional: ros2 (imports rclpy)

    class BagRecorderNode(Node):
        def __init__(self) -> None:
            super().__init__("bag_recorder")
            folder = self.declare_parameter("record_dir", "bags").value
            cams = tuple(c for c in (self.declare_parameter("cameras", [""]).value or ()) if c)
            mode = self.declare_parameter("record_images", "raw").value
            raw = cams if mode == "raw" else ()
            packed = tuple(f"camera/{c}/image_raw" for c in cams) if mode == "compressed" else ()
            self.recorder = BagRecorder(self, arm_topics(raw), folder, compress=packed)
            self.recorder.start_episode()
            if self.recorder.bag is not None:  # else: paused on a full disk (one message said so)
                self.get_logger().info(f"recording {self.get_namespace()} into {self.recorder.bag.folder}")
            self.create_timer(5.0, self._retry)

        def _retry(self) -> None:  # a session paused by a full disk records again (a new bag) once there is space
            if self.recorder.bag is None:
                self.recorder.start_episode()

        def close(self) -> None:  # run_node: after the spin loop stopped, before rclpy shuts down
            self.recorder.end_episode(session=True)  # with what is still queued (it drains)
            self.recorder.close()

    return run_node(BagRecorderNode, argv)


if __name__ == "__main__":
    sys.exit(main())
