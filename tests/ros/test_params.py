"""Every parameter type set at run time through the parameter service of real node processes (what `ros2 param set`
does): doubles, integers, booleans, strings and arrays take effect; start-up-only parameters are read-only and a
set is refused with the reason."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.ros


def _call(node, client, request, timeout: float = 10.0):
    import rclpy

    assert client.wait_for_service(timeout_sec=30.0), client.srv_name
    future = client.call_async(request)
    deadline = time.monotonic() + timeout
    while not future.done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    assert future.done(), f"no answer from {client.srv_name}"
    return future.result()


@pytest.mark.timeout(180)
def test_parameters_of_every_type_are_set_at_run_time_and_startup_ones_refused(arm_graph):
    import rclpy
    from rcl_interfaces.srv import GetParameters, SetParameters
    from rclpy.node import Node
    from rclpy.parameter import Parameter, parameter_value_to_python

    rclpy.init()
    node = Node("param_client")
    try:
        def set_params(target: str, values: dict) -> list:
            client = node.create_client(SetParameters, f"/{target}/set_parameters")
            msgs = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
            req = SetParameters.Request(parameters=msgs)
            return list(_call(node, client, req).results)

        def get_params(target: str, names: list[str]) -> list:
            client = node.create_client(GetParameters, f"/{target}/get_parameters")
            values = _call(node, client, GetParameters.Request(names=names)).values
            return [parameter_value_to_python(v) for v in values]

        cases = {  # node -> {parameter: new value}, one of each type
            "arm_safety": {"watchdog_timeout": 0.09, "limits.workspace_low": [0.31, -0.24, 0.02],
                           "limits.max_force": 55.0},
            "arm_controller": {"gains.torque_limits": [80.0, 80.0, 80.0, 80.0, 10.0, 10.0, 10.0],
                               "gripper_max_speed": 0.1},
            "arm_hardware": {"joint_noise": 0.001, "reset_teleports_arm": True},
        }
        for target, values in cases.items():
            results = set_params(target, values)
            assert all(r.successful for r in results), (target, [r.reason for r in results])
            got = get_params(target, list(values))
            for (name, want), value in zip(values.items(), got):
                assert list(value) == pytest.approx(want) if isinstance(want, list) else value == want, name
        refused = set_params("arm_hardware", {"task": "Reach", "image_size": 64})
        refused += set_params("arm_controller", {"publish_array": True})  # decides what it advertises at start
        assert not any(r.successful for r in refused)
        assert all("read-only" in r.reason for r in refused), [r.reason for r in refused]
        # the array form of the efforts is advertised only when it is published
        separate = "arm_controller" in arm_graph.procs  # else the stack: its controller runs in the physics loop
        discovered = ("/joint_command", "/joint_states") if separate else ("/joint_states",)
        deadline = time.monotonic() + 10.0  # discovery of the graph's publishers
        while any(node.count_publishers(t) < 1 for t in discovered) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        assert all(node.count_publishers(t) == 1 for t in discovered)
        assert node.count_publishers("/effort_controller/commands") == 0
        bad = set_params("arm_safety", {"limits.workspace_low": [0.7, 0.0, 0.0]})  # above workspace_high
        assert not bad[0].successful and bad[0].reason
        assert get_params("arm_safety", ["limits.workspace_low"])[0] == pytest.approx([0.31, -0.24, 0.02])
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert all(arm_graph.alive().values())


@pytest.mark.timeout(120)
def test_an_incompatible_qos_command_publisher_is_reported_once(graph):
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data

    graph.start("arm_safety")
    rclpy.init()
    node = Node("best_effort_commander")
    try:
        pub = node.create_publisher(PoseStamped, "policy/target_pose", qos_profile_sensor_data)
        deadline = time.monotonic() + 60
        while "incompatible QoS" not in graph.log("arm_safety") and time.monotonic() < deadline:
            pub.publish(PoseStamped())
            rclpy.spin_once(node, timeout_sec=0.1)
        time.sleep(1.0)
    finally:
        node.destroy_node()
        rclpy.shutdown()
    log = graph.log("arm_safety")
    assert log.count("incompatible QoS") == 1, log[-2000:]
    assert "/policy/target_pose" in log and "RELIABILITY" in log


def test_a_double_given_as_an_integer_is_a_double_and_parameters_say_what_they_are() -> None:
    """`-p limits.max_force:=60` (an integer on the command line) is read as the double 60.0; an integer set at run
    time is refused (rclpy's type check), never stored as an integer; every parameter has its field's docstring as
    its description; an array of the wrong length is refused naming the parameter."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from robot_rl.ros.params import declare_config
    from robot_rl_controllers.ros_safety_config import ArmSafetyConfig

    context = Context()
    rclpy.init(args=["--ros-args", "-p", "limits.max_force:=60", "-p", "watchdog_timeout:=1"], context=context)
    try:
        node = Node("params_probe", context=context)
        cfg = declare_config(node, ArmSafetyConfig())
        force = node.get_parameter("limits.max_force")
        assert force.type_ == Parameter.Type.DOUBLE and force.value == 60.0 and cfg.limits.max_force == 60.0
        assert node.get_parameter("watchdog_timeout").type_ == Parameter.Type.DOUBLE
        result = node.set_parameters([Parameter("limits.max_force", value=70)])[0]
        assert not result.successful and node.get_parameter("limits.max_force").value == 60.0
        result = node.set_parameters([Parameter("limits.workspace_low", value=[0.3, -0.25])])[0]
        assert not result.successful and "limits.workspace_low: needs 3 values, got 2" in result.reason, result.reason
        described = node.describe_parameters(["limits.max_force", "watchdog_timeout", "watchdog_rate_hz"])
        assert all(d.description for d in described), described
        assert "Measured EE force" in described[0].description and "start-up only" in described[2].description
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
