"""Read-only service queries that survive a lost response.

Fast DDS's service sends its response only if the client's response reader has matched within 100 ms of the
request (ros2/rmw_fastrtps#390, #467); on a loaded machine discovery takes longer and the response is dropped, so a
client that sent one request waits forever. A query (``get_parameters``, ``list_controllers``) changes nothing, so
it is sent again until one answer comes back.
"""

from __future__ import annotations

import time
from typing import Any


def query(node: Any, srv_type: type, service: str, request: Any, timeout: float,
          resend_every: float = 2.0) -> Any | None:
    """Calls the read-only ``service`` with ``request``, sending it again every ``resend_every`` s until an answer
    comes; the response, or None when none came within ``timeout`` s. Raises TimeoutError when no server appears
    within ``timeout``. ``node`` must be spun by an executor elsewhere (as robot_rl's links are)."""
    client = node.create_client(srv_type, service)
    try:
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f"no {service} service within {timeout:.0f} s")
        deadline = time.monotonic() + timeout
        futures = []
        while time.monotonic() < deadline:
            futures.append(client.call_async(request))
            resend = min(deadline, time.monotonic() + resend_every)
            while time.monotonic() < resend:
                for future in futures:
                    if future.done():
                        return future.result()
                time.sleep(0.02)
        return None
    finally:
        node.destroy_client(client)
