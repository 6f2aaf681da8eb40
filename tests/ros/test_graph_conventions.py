"""What a ROS 2 user's tools expect of the sim hardware's graph, checked from outside as such a tool would: a
``CameraInfo`` beside every ``image_raw``, every movable joint of the published URDF in some ``joint_states``, and
the arm's root frame ``base_link`` (REP-105)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.ros


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("node", "namespace"), [("arm_hardware", "/arm"), ("car_hardware", "/car")])
def test_cameras_have_camera_info_and_urdf_joints_have_states(graph, node: str, namespace: str) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import CameraInfo, Image, JointState
    from std_msgs.msg import String

    from robot_rl.ros.link import RosLink

    graph.start(node, "-r", f"__ns:={namespace}", "-p", "image_size:=16")
    link = RosLink("conventions_probe")
    try:
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        urdfs: list[str] = []
        link.node.create_subscription(String, f"{namespace}/robot_description", lambda m: urdfs.append(m.data), latched)
        deadline = time.monotonic() + 60
        images: list[str] = []
        while time.monotonic() < deadline and not (urdfs and images):
            images = [n for n, _ in link.node.get_topic_names_and_types() if n.endswith("/image_raw")]
            time.sleep(0.2)
        assert urdfs and images, (urdfs[:1], images, graph.log(node)[-2000:])
        infos, seen_joints = {}, set()
        for image in images:
            info = image.rsplit("/", 1)[0] + "/camera_info"
            link.subscribe(info, CameraInfo, info, lambda m: (m.width, m.height, m.header.frame_id, list(m.k)))
            link.subscribe(image, Image, image, lambda m: m.header.frame_id)
            infos[image] = info
        link.subscribe("joints", JointState, f"{namespace}/joint_states", lambda m: list(m.name), depth=1000)
        missing = link.wait_for([*infos.values(), *infos.keys(), "joints"], 30.0)
        assert not missing, missing
        for image, info in infos.items():
            width, height, frame, k = link.streams[info].latest()[1]
            assert (width, height) == (16, 16) and k[0] > 0 and k[2] == 8.0, (info, k)
            assert frame == link.streams[image].latest()[1], (frame, image)  # the image's optical frame
        for _, names in list(link.streams["joints"].items):
            seen_joints |= set(names)
    finally:
        link.close()
    urdf = ET.fromstring(urdfs[0])
    movable = {j.get("name") for j in urdf.iter("joint") if j.get("type") != "fixed"}
    assert movable and movable <= seen_joints, (movable - seen_joints, seen_joints)
    if node == "arm_hardware":
        roots = {link_.get("name") for link_ in urdf.iter("link")} - {j.find("child").get("link")
                                                                      for j in urdf.iter("joint")}
        assert roots == {"base_link"}, roots
