"""A base policy behind a policy server: openpi's websocket protocol (see :mod:`robot_rl.policies.server`).

``RemotePolicy("ws://host:8000")`` connects, reads the server's metadata frame and then answers ``infer`` like a
local policy. A real openpi (pi0 / pi0.5) server sends metadata of its own kind: give what robot_rl needs
(``action_dim``, ``chunk_length``, ``control_hz``, ...) with ``metadata`` and its observation names with ``keys``.

Failure behaviour (the executor calls ``infer`` off the control thread, so none of this blocks the robot):

* a reply later than ``timeout_s`` raises :class:`PolicyTimeout`; the connection is dropped (a late reply would
  otherwise answer the next request) and the next call reconnects;
* a server that is gone raises :class:`PolicyServerGone` naming the URL; the next call tries again;
* a connection found closed when a request is sent (a restarted server, a missed keepalive) is replaced once
  and the request sent on the new one;
* a text reply (the server refused the request) raises :class:`PolicyError` with the server's words.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from robot_rl.policies.base import PolicyError, PolicyMetadata, check_chunk, check_noise
from robot_rl.policies.config import RequestKeys
from robot_rl.policies.wire import WireError, packb, unpackb


class PolicyTimeout(PolicyError):
    """The server did not answer within the timeout."""


class PolicyServerGone(PolicyError):
    """The server cannot be reached (not started, stopped, network down)."""


class RemotePolicy:
    """A policy server as a :class:`~robot_rl.policies.base.BasePolicy`."""

    def __init__(self, url: str, token: str = "", timeout_s: float = 5.0, keys: RequestKeys | None = None,
                 metadata: Mapping[str, Any] | None = None, connect_timeout_s: float = 10.0,
                 max_message_bytes: int = 64 << 20) -> None:
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"policy server URL must start with ws:// or wss://, got {url!r}")
        self.url, self.token, self.timeout_s = url, token, timeout_s
        self.keys = keys or RequestKeys()
        self.connect_timeout_s, self.max_message_bytes = connect_timeout_s, max_message_bytes
        self._overrides = dict(metadata or {})
        self._ws: ClientConnection | None = None
        self.server_metadata: dict[str, Any] = {}
        self.last_server_timing: dict[str, float] = {}
        self.reconnects = 0
        self._lock = threading.Lock()
        self._connect()
        base = dict(self.server_metadata.get("robot_rl") or {})
        try:
            self.metadata = PolicyMetadata.from_dict({**base, **self._overrides})
        except (ValueError, TypeError) as exc:
            raise ValueError(f"policy server {url}: {exc}; the server sent {sorted(self.server_metadata)}: give the "
                             "missing fields with base_policy.metadata") from None

    def _connect(self) -> None:
        headers = {"Authorization": f"Api-Key {self.token}"} if self.token else None
        try:
            ws = connect(self.url, additional_headers=headers, compression=None, max_size=self.max_message_bytes,
                         open_timeout=self.connect_timeout_s, proxy=None, legacy=True)
        except InvalidStatus as exc:
            status = exc.response.status_code
            hint = " (wrong or missing token: set the token's environment variable)" if status == 401 else ""
            raise PolicyError(f"policy server {self.url} refused the connection: HTTP {status}{hint}") from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise PolicyServerGone(f"policy server {self.url} cannot be reached: {type(exc).__name__}: {exc}") from None
        try:
            self.server_metadata = dict(unpackb(ws.recv(timeout=self.connect_timeout_s), self.max_message_bytes))
        except (TimeoutError, ConnectionClosed, WireError, TypeError, ValueError) as exc:
            ws.close()
            raise PolicyError(f"policy server {self.url} sent no valid metadata frame: {exc}") from None
        self._ws = ws

    def _drop(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail in many ways
                pass
            self._ws = None

    def _send(self, message: bytes) -> ClientConnection:
        """Sends on the connection (opened first if there is none). A connection found closed when sending (a
        restarted server, or a keepalive ping the client missed while its host was starved) is replaced once: the
        request never left, so sending it again cannot run it twice."""
        if self._ws is None:
            self._reopen()
        try:
            self._ws.send(message)
        except ConnectionClosed:
            self._reopen()
            self._ws.send(message)
        return self._ws

    def _reopen(self) -> None:
        self._drop()
        self._connect()
        self.reconnects += 1

    def infer(self, obs: Mapping[str, Any], instruction: str = "", noise: np.ndarray | None = None) -> np.ndarray:
        with self._lock:  # one request in flight per connection (the protocol has no request ids)
            return self._infer(obs, instruction, noise)

    def _infer(self, obs: Mapping[str, Any], instruction: str, noise: np.ndarray | None) -> np.ndarray:
        noise = check_noise(noise, self.metadata, f"policy server {self.url}")
        try:
            ws = self._send(packb(self.keys.request(obs, instruction, noise)))
            reply = ws.recv(timeout=self.timeout_s)
        except TimeoutError:
            self._drop()
            raise PolicyTimeout(f"policy server {self.url}: no reply within {self.timeout_s:g} s") from None
        except (ConnectionClosed, OSError) as exc:
            self._drop()
            raise PolicyServerGone(f"policy server {self.url} is gone: {exc}") from None
        if isinstance(reply, str):
            raise PolicyError(f"policy server {self.url}: {reply.strip()}")
        try:
            data = unpackb(reply, self.max_message_bytes)
            self.last_server_timing = dict(data.get("server_timing") or {})
            actions = data[self.keys.actions]
        except (WireError, KeyError, AttributeError, TypeError) as exc:
            raise PolicyError(f"policy server {self.url}: reply without a valid {self.keys.actions!r}: {exc}") from None
        return check_chunk(actions, self.metadata, f"policy server {self.url}")

    def reset(self) -> None:
        """openpi's protocol keeps no episode state on the wire: nothing to send."""

    def close(self) -> None:
        self._drop()


def health(url: str, timeout_s: float = 2.0) -> bool:
    """Whether ``GET /healthz`` of the server at ``url`` (ws:// or http://) answers 200."""
    http_url = url.replace("wss://", "https://").replace("ws://", "http://").rstrip("/") + "/healthz"
    try:
        with urllib.request.urlopen(http_url, timeout=timeout_s) as reply:  # noqa: S310 - our own server's URL
            return reply.status == 200
    except OSError:
        return False


def token_from_env(name: str) -> str:
    """The token in environment variable ``name`` ('' when unset)."""
    return os.environ.get(name, "") if name else ""


def wait_for_server(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not health(url):
        if time.monotonic() > deadline:
            raise PolicyServerGone(f"policy server {url} did not come up within {timeout_s:g} s")
        time.sleep(0.1)
