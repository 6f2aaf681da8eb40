"""A read-only service query survives lost responses: a server in its own process drops its first responses, as
Fast DDS does when the client's response reader has not matched within 100 ms of the request, and the query sends
again until one answer comes; a server that never answers gives None after the timeout, a missing one an error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytestmark = pytest.mark.ros

SERVER = textwrap.dedent("""
    import sys
    import rclpy
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    drop = int(sys.argv[1])
    rclpy.init()
    node = Node("lossy")
    seen = []

    def answer(request, response):
        seen.append(1)
        response.success, response.message = True, str(len(seen))
        return response

    service = node.create_service(Trigger, "lossy/query", answer)
    send = service.send_response

    def lossy_send(response, header):  # the first `drop` responses never reach the client
        if len(seen) > drop:
            send(response, header)

    service.send_response = lossy_send
    print("ready", flush=True)
    rclpy.spin(node)
""")


@pytest.mark.timeout(120)
def test_a_query_is_sent_again_until_an_answer_comes(domain: int) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from robot_rl.ros.query import query

    def serve(drop: int) -> subprocess.Popen:
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(drop)], stdout=subprocess.PIPE, text=True)
        servers.append(server)
        assert server.stdout.readline().strip() == "ready"
        return server

    servers: list[subprocess.Popen] = []
    rclpy.init()
    node = Node("asker")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        lossy = serve(drop=2)
        start = time.monotonic()
        answer = query(node, Trigger, "/lossy/query", Trigger.Request(), timeout=30.0, resend_every=0.5)
        assert answer is not None and answer.message == "3", answer  # the third request's answer came back
        assert time.monotonic() - start >= 1.0  # after two resends
        lossy.kill()
        lossy.wait()
        serve(drop=1000)  # one that never answers
        start = time.monotonic()
        assert query(node, Trigger, "/lossy/query", Trigger.Request(), timeout=2.0, resend_every=0.5) is None
        assert 2.0 <= time.monotonic() - start < 10.0
        with pytest.raises(TimeoutError, match="no /nobody/query service"):
            query(node, Trigger, "/nobody/query", Trigger.Request(), timeout=1.0)
    finally:
        for server in servers:
            server.kill()
            server.wait()
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown()
