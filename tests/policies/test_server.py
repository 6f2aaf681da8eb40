"""The policy server and client: openpi's websocket + msgpack protocol, bit-exact arrays, refusals that keep the
server serving, tokens, timeouts, a server that goes away, and an openpi-style server written here from the
protocol's description."""

from __future__ import annotations

import asyncio
import functools
import pickle
import threading
import time

import msgpack
import numpy as np
import pytest
from websockets.asyncio.server import serve
from websockets.protocol import State
from websockets.sync.client import connect

from robot_rl.policies.base import PolicyError, PolicyMetadata
from robot_rl.policies.client import PolicyServerGone, PolicyTimeout, RemotePolicy, health
from robot_rl.policies.config import RequestKeys
from robot_rl.policies.server import PolicyServer
from robot_rl.policies.wire import WireError, packb, unpackb

CAMS = {"front": (224, 224, 3), "wrist": (224, 224, 3)}


class EchoPolicy:
    """Returns a chunk computed from every input, so a wrong byte anywhere shows in the reply."""

    def __init__(self, latency_s: float = 0.0):
        self.metadata = PolicyMetadata(action_dim=4, chunk_length=8, control_hz=15.0, state_dim=11, cameras=CAMS,
                                       accepts_noise=True, absolute_dims=(3,), name="echo")
        self.latency_s = latency_s
        self.last = None

    def infer(self, obs, instruction="", noise=None):
        self.last = (obs, instruction, noise)
        time.sleep(self.latency_s)
        frames = sum(float(f.astype(np.float64).sum()) for f in obs["pixels"].values())
        chunk = np.tile(obs["state"][:4], (8, 1)) / 10 + (frames % 7) / 100 + len(instruction) / 1000
        return chunk if noise is None else chunk + noise / 10

    def reset(self):
        pass

    def close(self):
        pass


def observation(seed: int = 0):
    rng = np.random.default_rng(seed)
    return {"state": rng.uniform(-1, 1, 11).astype(np.float32),
            "pixels": {c: rng.integers(0, 256, s, dtype=np.uint8) for c, s in CAMS.items()}}


@pytest.fixture
def server():
    srv = PolicyServer(EchoPolicy(), port=0)
    port = srv.start()
    yield srv, f"ws://127.0.0.1:{port}"
    srv.stop()


def test_wire_round_trip_is_bit_exact():
    arrays = {"f32": np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32),
              "f64": np.array([np.pi, -0.0, np.inf, np.nan]), "u8": np.arange(256, dtype=np.uint8).reshape(16, 16),
              "i64": np.array([-(2**62), 2**62]), "b": np.array([True, False]), "empty": np.zeros((0, 4), np.float32),
              "be": np.arange(4, dtype=">i4"), "scalar": np.float32(1.5), "text": "pick up", "nested": [{"x": 1}]}
    back = unpackb(packb(arrays))
    for key in ("f32", "f64", "u8", "i64", "b", "empty", "be"):
        assert back[key].dtype == arrays[key].dtype and back[key].shape == arrays[key].shape
        assert back[key].tobytes() == arrays[key].tobytes()
    assert back["scalar"] == np.float32(1.5) and back["text"] == "pick up" and back["nested"] == [{"x": 1}]


@pytest.mark.parametrize("payload, match", [
    (pickle.dumps({"state": np.zeros(3)}), "not a msgpack message"),
    (msgpack.packb({b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O", b"shape": [1]}), "not allowed"),
    (msgpack.packb({b"__ndarray__": True, b"data": b"\0" * 7, b"dtype": "<f4", b"shape": [2]}), "does not fit"),
    (msgpack.packb({b"__ndarray__": True, b"data": b"", b"dtype": "V8", b"shape": [0]}), "not allowed"),
    (msgpack.packb(msgpack.ExtType(1, b"code")), "extension type"),
])
def test_wire_refuses_what_could_carry_code_or_lies_about_its_size(payload, match):
    with pytest.raises(WireError, match=match):
        unpackb(payload)


def test_round_trip_metadata_and_arrays_bit_exact(server):
    srv, url = server
    client = RemotePolicy(url)
    assert client.metadata == srv.policy.metadata
    obs = observation(1)
    noise = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    got = client.infer(obs, "pick up the red cube", noise)
    seen_obs, seen_instruction, seen_noise = srv.policy.last
    assert seen_instruction == "pick up the red cube"
    assert seen_obs["state"].tobytes() == obs["state"].tobytes()
    assert all(seen_obs["pixels"][c].tobytes() == obs["pixels"][c].tobytes() for c in CAMS)
    assert seen_noise.tobytes() == noise.tobytes()
    want = EchoPolicy().infer(obs, "pick up the red cube", noise)
    assert got.dtype == np.float32 and np.array_equal(got, np.clip(want.astype(np.float32), -1, 1))
    assert client.last_server_timing["infer_ms"] >= 0
    client.close()


def test_bad_messages_get_a_clear_error_and_the_server_keeps_serving(server):
    srv, url = server
    other = RemotePolicy(url)
    with connect(url, compression=None, max_size=None) as raw:
        unpackb(raw.recv())  # metadata
        for bad, says in [(pickle.dumps(object), "not a msgpack message"),
                          (packb({"observation/state": np.zeros(11, np.float32)}), "lacks camera"),
                          (packb({**RequestKeys().request(observation(), "", None),
                                  "observation/state": np.zeros(3, np.float32)}), "state must be [11]"),
                          (packb([1, 2, 3]), "must be a map"),
                          ("a text frame", "expected a binary message")]:
            raw.send(bad)
            reply = raw.recv(timeout=10)
            assert isinstance(reply, str) and "refused" in reply and says in reply, reply
            assert other.infer(observation(3)).shape == (8, 4)  # everyone else is still served
        raw.send(packb(RequestKeys().request(observation(), "ok", None)))  # the same connection still works too
        assert unpackb(raw.recv(timeout=10))["actions"].shape == (8, 4)
    client = RemotePolicy(url)
    with pytest.raises(PolicyError, match="takes no noise|noise must be"):
        client.infer(observation(), "", np.zeros((2, 2), np.float32))
    assert srv.served >= 6


def test_oversized_message_closes_only_that_connection():
    srv = PolicyServer(EchoPolicy(), port=0, max_message_bytes=1 << 20)
    url = f"ws://127.0.0.1:{srv.start()}"
    try:
        big = RemotePolicy(url)  # a 2 x 224^2 observation is ~300 kB: under the limit
        assert big.infer(observation()).shape == (8, 4)
        huge = {**observation(), "pixels": {c: np.zeros((1024, 1024, 3), np.uint8) for c in CAMS}}
        with pytest.raises(PolicyServerGone, match="is gone"):
            big.infer(huge)
        assert RemotePolicy(url).infer(observation()).shape == (8, 4)
        assert big.infer(observation()).shape == (8, 4)  # reconnects
        assert big.reconnects == 1
    finally:
        srv.stop()


def test_token_is_required_and_checked():
    srv = PolicyServer(EchoPolicy(), port=0, token="s3cret")
    url = f"ws://127.0.0.1:{srv.start()}"
    try:
        for token in ("", "wrong"):
            with pytest.raises(PolicyError, match="HTTP 401"):
                RemotePolicy(url, token=token)
        assert RemotePolicy(url, token="s3cret").infer(observation()).shape == (8, 4)
        assert health(url)  # the health check needs no token
        assert srv.refused == 2
    finally:
        srv.stop()


def test_timeout_drops_the_reply_and_the_next_call_reconnects():
    policy = EchoPolicy(latency_s=0.6)
    srv = PolicyServer(policy, port=0)
    url = f"ws://127.0.0.1:{srv.start()}"
    try:
        client = RemotePolicy(url, timeout_s=0.2)
        t0 = time.perf_counter()
        with pytest.raises(PolicyTimeout, match="no reply within 0.2 s"):
            client.infer(observation(0), "first")
        assert time.perf_counter() - t0 < 0.5
        policy.latency_s = 0.0
        time.sleep(0.7)  # the late reply to "first" is never read as the answer to the next request
        got = client.infer(observation(5), "second")
        assert np.allclose(got, np.clip(EchoPolicy().infer(observation(5), "second"), -1, 1))
        assert client.reconnects == 1
    finally:
        srv.stop()


def test_a_server_that_goes_away_is_named_and_a_restarted_one_is_used_again():
    srv = PolicyServer(EchoPolicy(), port=0)
    port = srv.start()
    url = f"ws://127.0.0.1:{port}"
    client = RemotePolicy(url)
    srv.stop()
    with pytest.raises(PolicyServerGone, match=f"policy server {url}"):
        client.infer(observation())
    with pytest.raises(PolicyServerGone, match="cannot be reached"):
        client.infer(observation())
    assert not health(url)
    srv2 = PolicyServer(EchoPolicy(), port=port)
    srv2.start()
    try:
        assert client.infer(observation()).shape == (8, 4)
    finally:
        srv2.stop()


def test_a_connection_closed_while_idle_is_replaced_without_an_error():
    # the server restarts between two calls (a keepalive the client missed on a starved host closes it the same
    # way): the request never left on the closed connection, so the call goes on a new one instead of failing
    srv = PolicyServer(EchoPolicy(), port=0)
    port = srv.start()
    url = f"ws://127.0.0.1:{port}"
    client = RemotePolicy(url)
    assert client.infer(observation(1)).shape == (8, 4)
    srv.stop()
    deadline = time.monotonic() + 10.0  # the server's close frame reaches the idle client (slowly on a loaded host)
    while client._ws.state is not State.CLOSED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client._ws.state is State.CLOSED
    srv2 = PolicyServer(EchoPolicy(), port=port)
    srv2.start()
    try:
        got = client.infer(observation(2), "again")
        assert np.allclose(got, np.clip(EchoPolicy().infer(observation(2), "again"), -1, 1))
        assert client.reconnects == 1 and srv2.served == 1
    finally:
        srv2.stop()


def _openpi_pack(obj):
    """The array extension exactly as openpi's msgpack_numpy documents it (bin keys, dtype str, shape)."""
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    return obj


def _openpi_unpack(obj):
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"])
    return obj


def test_client_speaks_to_an_openpi_style_server_with_its_own_keys_and_metadata():
    """A server written from openpi's protocol (no robot_rl metadata, LIBERO-style keys, 'actions' + timing in the
    reply): RemotePolicy runs it with metadata and keys from config."""
    seen = {}
    ready = threading.Event()
    port_box = []
    pack = functools.partial(msgpack.packb, default=_openpi_pack)
    unpack = functools.partial(msgpack.unpackb, object_hook=_openpi_unpack)

    async def handler(ws):
        await ws.send(pack({"policy": "pi05_libero"}))
        async for message in ws:
            obs = unpack(message)
            seen.update(obs)
            await ws.send(pack({"actions": np.full((10, 7), 0.25, np.float64), "server_timing": {"infer_ms": 1.0}}))

    async def main():
        async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as s:
            port_box.append(s.sockets[0].getsockname()[1])
            ready.set()
            await asyncio.sleep(30)

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    assert ready.wait(10)
    keys = RequestKeys(state="observation/state", cameras={"front": "observation/image",
                                                           "wrist": "observation/wrist_image"})
    url = f"ws://127.0.0.1:{port_box[0]}"
    with pytest.raises(ValueError, match="lacks.*action_dim.*chunk_length|base_policy.metadata"):
        RemotePolicy(url, keys=keys)
    client = RemotePolicy(url, keys=keys, metadata={"action_dim": 7, "chunk_length": 10, "control_hz": 10})
    chunk = client.infer(observation(), "put the bowl on the plate")
    assert chunk.shape == (10, 7) and chunk.dtype == np.float32 and np.all(chunk == 0.25)
    assert seen["prompt"] == "put the bowl on the plate"
    assert seen["observation/image"].shape == (224, 224, 3) and seen["observation/wrist_image"].dtype == np.uint8
    assert client.server_metadata == {"policy": "pi05_libero"}


def test_a_policy_with_action_bounds_is_normalised_once_across_the_wire():
    """A local policy's chunk is already in [-1, 1] (its bounds applied by the policy): the server sends it and its
    metadata without the bounds, so neither side normalises it again (here [0, 10] units: 5 -> 0.0, not -1)."""
    from robot_rl.policies.base import check_chunk

    class Bounded:
        metadata = PolicyMetadata(action_dim=2, chunk_length=1, state_dim=3, action_low=(0.0, 0.0),
                                  action_high=(10.0, 10.0), name="bounded")

        def infer(self, obs, instruction="", noise=None):
            return check_chunk(np.array([[5.0, 10.0]]), self.metadata, "bounded")  # as a BasePolicy does

        def reset(self):
            pass

        def close(self):
            pass

    srv = PolicyServer(Bounded(), port=0)
    port = srv.start()
    try:
        client = RemotePolicy(f"ws://127.0.0.1:{port}")
        got = client.infer({"state": np.zeros(3, np.float32)})
        assert np.allclose(got, [[0.0, 1.0]]) and np.allclose(got, Bounded().infer({})), got
        assert client.metadata.action_low == () and client.metadata.name == "bounded"
        client.close()
    finally:
        srv.stop()
