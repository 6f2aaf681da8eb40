"""``robot-rl serve-policy``: any base policy behind a websocket server that speaks openpi's policy-server protocol.

Protocol (openpi's ``WebsocketPolicyServer``, so its clients work unchanged):

* on connect the server sends one msgpack map, the metadata (``{"robot_rl": <PolicyMetadata>, ...}``);
* each binary message from the client is a msgpack observation map (:class:`~robot_rl.policies.config.RequestKeys`
  names its entries) answered by ``{"actions": float32 [H, A], "server_timing": {"infer_ms": ...,
  "prev_total_ms": ...}}``;
* a request that cannot be served is answered by a text message saying why; the connection stays open and the
  server goes on serving every client;
* ``GET /healthz`` answers 200 ``OK``.

Safety: binds 127.0.0.1 unless told otherwise; with a token, a client must send ``Authorization: Api-Key
<token>`` (openpi's client header) or the handshake is refused with 401; messages over ``max_message_bytes`` close
that connection (1009); arrays are decoded strictly (:mod:`robot_rl.policies.wire`), nothing is unpickled.
Inference runs on a worker thread, one request at a time (one model), so the event loop keeps answering health
checks and other clients' handshakes during a slow inference.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import http
import threading
import time
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from robot_rl.policies.base import BasePolicy, check_chunk, check_noise
from robot_rl.policies.config import RequestKeys
from robot_rl.policies.wire import WireError, packb, unpackb
from robot_rl.utils.log import get_logger

log = get_logger(__name__)


class PolicyServer:
    """Serves ``policy``; :meth:`start` in a background thread (returns the port) or :meth:`serve_forever`."""

    def __init__(self, policy: BasePolicy, host: str = "127.0.0.1", port: int = 8000, token: str = "",
                 keys: RequestKeys | None = None, max_message_bytes: int = 64 << 20) -> None:
        self.policy, self.host, self.port, self.token = policy, host, port, token
        self.keys = keys or RequestKeys()
        self.max_message_bytes = max_message_bytes
        # a BasePolicy's chunks are already in [-1, 1] (its action bounds applied): sent without bounds, so neither
        # this server's check nor the client normalises them a second time
        self.wire_metadata = dataclasses.replace(policy.metadata, action_low=(), action_high=())
        self.metadata = {"robot_rl": self.wire_metadata.to_dict(), "protocol": "openpi-websocket"}
        self.served = 0
        self.refused = 0
        self._infer_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # ------------------------------------------------------------------ http
    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.token:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Api-Key {self.token}".encode()):
                self.refused += 1
                return Response(http.HTTPStatus.UNAUTHORIZED.value, "Unauthorized",
                                Headers({"Content-Type": "text/plain"}), b"missing or wrong API key\n")
        return None

    # ------------------------------------------------------------- requests
    def _infer(self, request: Any) -> dict[str, Any]:
        meta = self.policy.metadata
        obs, instruction, noise = self.keys.observation(request, meta.cameras)
        if meta.state_dim and obs["state"].shape != (meta.state_dim,):
            raise ValueError(f"state must be [{meta.state_dim}], got {list(obs['state'].shape)}")
        noise = check_noise(noise, meta, "request noise")
        with self._infer_lock:
            t0 = time.perf_counter()
            actions = self.policy.infer(obs, instruction, noise)
            infer_ms = (time.perf_counter() - t0) * 1e3
        return {self.keys.actions: check_chunk(actions, self.wire_metadata, "policy output"),
                "server_timing": {"infer_ms": infer_ms}}

    async def _handler(self, ws: ServerConnection) -> None:
        await ws.send(packb(self.metadata))
        prev_total = None
        try:
            async for message in ws:
                start = time.monotonic()
                try:
                    request = unpackb(message, self.max_message_bytes)
                    reply = await asyncio.to_thread(self._infer, request)
                except (WireError, ValueError, RuntimeError) as exc:
                    log.warning("policy server: request from %s refused: %s", ws.remote_address, exc)
                    await ws.send(f"request refused: {exc}")
                    continue
                if prev_total is not None:
                    reply["server_timing"]["prev_total_ms"] = prev_total
                self.served += 1  # counted before the send: a client holding the reply finds it counted
                await ws.send(packb(reply))
                prev_total = (time.monotonic() - start) * 1e3
        except ConnectionClosed:
            pass

    async def _main(self) -> None:
        async with serve(self._handler, self.host, self.port, compression=None, max_size=self.max_message_bytes,
                         process_request=self._process_request) as server:
            self._server = server
            self.port = server.sockets[0].getsockname()[1] if self.port == 0 else self.port
            self._loop = asyncio.get_running_loop()
            self._ready.set()
            await server.serve_forever()

    def serve_forever(self) -> None:
        """Serves until interrupted (Ctrl-C)."""
        asyncio.run(self._main())

    def start(self) -> int:
        """Serves in a background thread; returns the port (``port=0`` picks a free one)."""
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="policy-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError(f"policy server did not start on {self.host}:{self.port}")
        return self.port

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        if self._thread is not None:
            self._thread.join(timeout=10)
