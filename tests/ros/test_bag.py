"""rosbag2 MCAP recording: messages recorded from real rclpy topics read back with an independent library
(rosbags) exactly; RosArmEnv records every episode through the real ROS 2 graph, and the bags become demos whose
actions and states match what the env stepped, and which train a policy."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.ros


@pytest.mark.timeout(120)
def test_recorded_messages_read_back_exactly_with_rosbags(domain, tmp_path):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rclpy.node import Node
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Float64

    from robot_rl.ros.bag import BagRecorder

    rclpy.init()
    try:
        node = Node("bag_test")
        topics = {"joint_states": JointState, "camera/front/image_raw": Image, "diagnostics": DiagnosticArray,
                  "policy/gripper": Float64}
        recorder = BagRecorder(node, topics, tmp_path / "bags")
        pubs = {t: node.create_publisher(c, t, 10) for t, c in topics.items()}
        sent = []
        deadline = time.monotonic() + 20
        while node.count_subscribers("joint_states") == 0 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        recorder.start_episode()
        for k in range(5):
            js = JointState(name=["j1", "j2"], position=[0.1 * k, -0.2], velocity=[1.0, 2.0])
            js.header.stamp.sec, js.header.frame_id = k, "base_link"
            img = Image(height=2, width=3, encoding="rgb8", step=9, data=bytes(range(18 * k, 18 * k + 18)[:18]))
            status = DiagnosticStatus(level=bytes([k % 3]), name="arm: safety", hardware_id="arm",
                                      values=[KeyValue(key="k", value=str(k))])
            diag = DiagnosticArray(status=[status])
            for topic, msg in (("joint_states", js), ("camera/front/image_raw", img), ("diagnostics", diag),
                               ("policy/gripper", Float64(data=0.01 * k))):
                pubs[topic].publish(msg)
                sent.append((topic, msg))
            for _ in range(10):
                rclpy.spin_once(node, timeout_sec=0.01)
        end = time.monotonic() + 5
        while time.monotonic() < end and sum(recorder.bag._counts.values()) < len(sent):
            rclpy.spin_once(node, timeout_sec=0.05)
        recorder.steps = 5
        recorder.end_episode(success=True)
        recorder.close()
        node.destroy_node()
    finally:
        rclpy.shutdown()
    index = [json.loads(x) for x in (tmp_path / "bags/episodes.jsonl").read_text().splitlines()]
    assert index == [{**index[0], "episode": 0, "bag": "episode_000000", "steps": 5, "success": True}]
    bag = tmp_path / "bags/episode_000000"
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap" and meta["message_count"] == len(sent)
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        got = [(c.topic, reader.deserialize(raw, c.msgtype)) for c, _, raw in reader.messages()]
    assert [t.lstrip("/") for t, _ in got] == [t for t, _ in sent]
    for (_, a), (_, b) in zip(got, sent):
        if hasattr(b, "position"):
            assert list(a.name) == b.name and np.allclose(a.position, b.position)
            assert a.header.stamp.sec == b.header.stamp.sec and a.header.frame_id == "base_link"
        elif hasattr(b, "encoding"):
            assert bytes(a.data) == bytes(b.data) and (a.height, a.width, a.encoding) == (2, 3, "rgb8")
        elif hasattr(b, "status"):
            assert a.status[0].values[0].value == b.status[0].values[0].value
            assert a.status[0].level == b.status[0].level[0]
        else:
            assert a.data == b.data


@pytest.mark.timeout(300)
def test_ros_arm_env_records_episodes_and_the_bags_become_demos(arm_graph, tmp_path):
    from robot_rl.agents.behavior_cloning import BCAgent, BCConfig
    from robot_rl.datasets.convert import import_dataset
    from robot_rl.envs.make import EnvConfig, make_env
    from robot_rl.replay.buffer import ReplayBuffer, ReplayConfig
    from robot_rl.replay.store import add_dataset
    from robot_rl.spaces import ObsSpec
    from tests.ros.experts import pickcube_expert

    env = make_env(EnvConfig(id="robot_rl.envs.ros_env:robot_rl/RosArm-v0",
                             kwargs={"record_dir": str(tmp_path / "rec")}, max_episode_steps=30))
    stepped = []
    try:
        for seed in range(2):
            obs, _ = env.reset(seed=seed)
            base = env.unwrapped
            states, actions, targets = [obs["state"]], [], [base.target_pos.copy()]
            for _ in range(30):
                action = pickcube_expert(obs["state"], base.target_pos)
                obs, _, terminated, truncated, _ = env.step(action)
                states.append(obs["state"])
                actions.append(action)
                targets.append(base.target_pos.copy())
                if terminated or truncated:
                    break
            moved = np.diff(np.array(targets), axis=0) / base.cfg.limits.max_step  # after the env's safety layer
            stepped.append((np.array(states), np.concatenate([moved, np.array(actions)[:, 3:]], axis=1)))
    finally:
        env.close()
    index = [json.loads(x) for x in (tmp_path / "rec/episodes.jsonl").read_text().splitlines()]
    assert [e["episode"] for e in index] == [0, 1] and all(e["steps"] == len(a) for e, (_, a) in zip(index, stepped))
    meta = import_dataset(tmp_path / "rec", tmp_path / "demos.zarr", fmt="rosbag")
    assert [e["length"] for e in meta["episodes"]] == [len(a) for _, a in stepped]
    from robot_rl.datasets.episodes import read_episodes

    spec, action_dim, episodes = read_episodes(tmp_path / "demos.zarr")
    for ep, (states, actions) in zip(episodes, stepped):
        # the recovered command is the target motion the env sent, after its first safety layer (the first from
        # the EE position in the first observation, where the env's target starts)
        np.testing.assert_allclose(ep.action[:, :3], np.clip(actions[:, :3], -1, 1), atol=1e-4)
        np.testing.assert_allclose(ep.action[:, 3], actions[:, 3], atol=1e-4)
        # every observation, the last included, is made of the very messages the env's was (the recorder's notes),
        # however late the recorder logged them
        np.testing.assert_allclose(ep.observations["state"], states, atol=1e-6)
    replay = ReplayBuffer(spec, action_dim, ReplayConfig(online_capacity=10, demos_capacity=200,
                                                         interventions_capacity=10))
    assert add_dataset(replay, str(tmp_path / "demos.zarr")) == sum(len(a) for _, a in stepped)
    agent = BCAgent(ObsSpec(spec.state_dim), 4, BCConfig(hidden_dims=(32,), batch_size=16))
    agent.prepare(replay)
    assert np.isfinite(agent.update(replay.sample(16, mix={"prior": 1.0}, utd=1))["bc_loss"])


@pytest.mark.timeout(120)
def test_camera_frames_recorded_as_jpeg_decode_within_tolerance(domain, tmp_path):
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import Image

    from robot_rl.datasets.bag_demos import image_from_msg, topic_series
    from robot_rl.ros.bag import BagRecorder
    from robot_rl.ros.msgs import image_msg

    rng = np.random.default_rng(0)
    frames = [np.clip(rng.normal(100, 2, (48, 64, 3)) + 2 * np.arange(64)[None, :, None], 0, 255).astype(np.uint8)
              for _ in range(4)]
    rclpy.init()
    try:
        node = Node("jpeg_test")
        recorder = BagRecorder(node, {}, tmp_path / "bags", compress=("camera/front/image_raw",))
        pub = node.create_publisher(Image, "camera/front/image_raw", 10)
        deadline = time.monotonic() + 20
        while node.count_subscribers("camera/front/image_raw") == 0 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        recorder.start_episode()
        for k, frame in enumerate(frames):
            pub.publish(image_msg(frame, 100.0 + k, "front_camera"))
            for _ in range(10):
                rclpy.spin_once(node, timeout_sec=0.01)
        end = time.monotonic() + 5
        while time.monotonic() < end and sum(recorder.bag._counts.values()) < len(frames):
            rclpy.spin_once(node, timeout_sec=0.05)
        recorder.close()
        node.destroy_node()
    finally:
        rclpy.shutdown()
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    with AnyReader([tmp_path / "bags/episode_000000"], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        assert [c.msgtype for c in reader.connections] == ["sensor_msgs/msg/CompressedImage"]
        _, msgs = topic_series(reader, "camera/front/image_raw/compressed")
    assert len(msgs) == len(frames)
    for msg, frame in zip(msgs, frames):
        assert msg.header.frame_id == "front_camera" and "jpeg" in msg.format
        decoded = image_from_msg(msg)
        assert decoded.shape == frame.shape and np.abs(decoded.astype(int) - frame).mean() < 6


@pytest.mark.timeout(240)
def test_the_recorder_node_records_a_session_that_becomes_demos(graph, tmp_path):
    from robot_rl.datasets.convert import import_dataset
    from robot_rl.envs.make import EnvConfig, make_env
    from tests.ros.conftest import ARM_NODES, wait_ready
    from tests.ros.experts import run_episode

    for node in ARM_NODES:
        graph.start(node)
    wait_ready(graph, "arm_hardware", "arm_safety")
    graph.start("bag_recorder", "-p", f"record_dir:={tmp_path / 'bags'}")
    env = make_env(EnvConfig(id="robot_rl.envs.ros_env:robot_rl/RosArm-v0", max_episode_steps=25))
    try:
        env.reset(seed=0)  # connects
        node, pub = env.unwrapped.link.node, env.unwrapped._pub_target

        def recorder_hears_the_env() -> bool:  # the safety node alone has two subscriptions on the topic (one
            # watches QoS): the recorder must be among them, and matched to the env's publisher (discovery between
            # processes can take seconds on a loaded machine); and it must already log the hardware's state (its
            # match with the hardware's publisher is not visible from here: the recorder says when a topic flows)
            subs = node.get_subscriptions_info_by_topic("/policy/target_pose")
            return (any(s.node_name == "bag_recorder" for s in subs) and pub.get_subscription_count() >= len(subs)
                    and "first message on /ee_pose" in graph.log("bag_recorder"))

        deadline = time.monotonic() + 60
        while not recorder_hears_the_env() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert recorder_hears_the_env(), graph.log("bag_recorder")
        before = len(env.unwrapped.publish_times)
        run_episode(env, seed=0, max_steps=25)
        sent = len(env.unwrapped.publish_times) - before
    finally:
        env.close()
    time.sleep(0.5)
    graph.procs["bag_recorder"].send_signal(2)  # SIGINT: the node closes the bag
    assert graph.procs["bag_recorder"].wait(20) == 0, graph.log("bag_recorder")
    bag = tmp_path / "bags/episode_000000"
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]}
    assert counts["/policy/target_pose"] >= 0.8 * sent, (counts, sent)
    assert counts["/ee_pose"] > counts["/policy/target_pose"], (counts, graph.log("bag_recorder"))  # 100 Hz
    demos = import_dataset(tmp_path / "bags", tmp_path / "demos.zarr", fmt="rosbag")
    assert demos["episodes"][0]["length"] == counts["/policy/target_pose"]


@pytest.mark.timeout(120)
def test_a_full_disk_pauses_the_recording_with_one_message_and_the_next_episode_records(domain, tmp_path):
    """The recorder's file-size limit lowered mid-episode (EFBIG, the path a full disk takes): one message, the
    unfinished episode's bag removed, the finished one whole; with the space back, the next episode records."""
    import resource

    import rclpy
    from rclpy.node import Node
    from rosbags.highlevel import AnyReader
    from sensor_msgs.msg import Image

    from robot_rl.ros.bag import BagRecorder

    rng = np.random.default_rng(0)

    def frame() -> Image:  # random pixels: a chunk compresses to about its raw size
        return Image(height=64, width=64, encoding="rgb8", step=192,
                     data=rng.integers(0, 256, 64 * 64 * 3, dtype=np.uint8).tobytes())

    rclpy.init()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        node = Node("bag_full_test")
        errors: list[str] = []
        recorder = BagRecorder(node, {"camera/front/image_raw": Image}, tmp_path / "bags")
        node.get_logger().error = errors.append  # the recorder's one message, captured
        pub = node.create_publisher(Image, "camera/front/image_raw", 10)
        deadline = time.monotonic() + 20
        while node.count_subscribers("camera/front/image_raw") == 0 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)

        def record(frames: int) -> None:
            for _ in range(frames):
                pub.publish(frame())
                rclpy.spin_once(node, timeout_sec=0.01)
            recorder.drain()

        recorder.start_episode()
        record(20)
        recorder.end_episode(ok=True)  # episode 0: finished, whole
        recorder.start_episode()
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))  # episode 1's first chunk (~1 MB) cannot fit
        try:
            record(200)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        assert recorder.bag is None and len(errors) == 1, errors
        assert "recording paused: the disk is full (" in errors[0] and "File too large" in errors[0], errors
        assert not (tmp_path / "bags" / "episode_000001").exists()
        recorder.end_episode()  # nothing to close: no line in the index
        recorder.start_episode()  # the space is back: episode 2 records
        record(20)
        recorder.end_episode(ok=True)
        recorder.close()
        node.destroy_node()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        rclpy.shutdown()
    index = [json.loads(line) for line in (tmp_path / "bags" / "episodes.jsonl").read_text().splitlines()]
    assert [e["episode"] for e in index] == [0, 2]
    for name in ("episode_000000", "episode_000002"):
        with AnyReader([tmp_path / "bags" / name]) as reader:
            assert sum(1 for _ in reader.messages()) >= 15, name
