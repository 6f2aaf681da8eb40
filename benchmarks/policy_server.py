"""Policy-server round trip on localhost: a 2 x 224^2 observation (plus a 14-d state and an instruction) sent to a
server in another process, answered with a [50, 7] action chunk by a policy that computes nothing, so the figure is
the protocol's own cost (msgpack arrays over a websocket). Beside it, in the same run: encoding + decoding the
request and reply in one process (no socket), the floor the wire format sets.

    python benchmarks/policy_server.py --requests 500
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import time

import numpy as np
from common import Table, write_result

from robot_rl.policies.base import PolicyMetadata
from robot_rl.policies.wire import packb, unpackb

SHAPE = (224, 224, 3)
META = PolicyMetadata(action_dim=7, chunk_length=50, control_hz=15.0, state_dim=14,
                      cameras={"base": SHAPE, "wrist": SHAPE}, name="null policy")


class NullPolicy:
    metadata = META

    def infer(self, obs, instruction="", noise=None):
        return np.zeros((50, 7), np.float32)

    def reset(self):
        pass

    def close(self):
        pass


def serve(port: int) -> None:
    from robot_rl.policies.server import PolicyServer

    PolicyServer(NullPolicy(), port=port).serve_forever()


def observation(rng: np.random.Generator) -> dict:
    return {"state": rng.normal(size=14).astype(np.float32),
            "pixels": {c: rng.integers(0, 256, SHAPE, dtype=np.uint8) for c in ("base", "wrist")}}


def percentiles(x: list[float]) -> tuple[float, float]:
    return float(np.percentile(x, 50) * 1e3), float(np.percentile(x, 99) * 1e3)


def tables(figures: dict) -> list[Table]:
    """The result's table: round trip and codec-only time, p50 / p99."""
    table = Table(f"Policy server on localhost: 2 x 224² frames + 14-d state + instruction "
                  f"({figures['request_bytes'] / 1e3:.0f} kB request), [50, 7] reply, {figures['requests']} requests",
                  ["quantity", "p50", "p99"], echo=False)
    labels = {"round_trip_ms": "round trip", "codec_only_ms": "encode + decode in one process (no socket)"}
    for key, label in labels.items():
        p50, p99 = figures[key]
        table.add(label, f"{p50:.2f} ms", f"{p99:.2f} ms")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results/policy_server.json)")
    args = parser.parse_args()
    from robot_rl.policies.client import RemotePolicy, wait_for_server
    from robot_rl.policies.config import RequestKeys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = mp.get_context("spawn").Process(target=serve, args=(port,), daemon=True)
    proc.start()
    rng = np.random.default_rng(0)
    try:
        url = f"ws://127.0.0.1:{port}"
        wait_for_server(url, 60)
        client = RemotePolicy(url)
        obs = [observation(rng) for _ in range(8)]
        for i in range(20):
            client.infer(obs[i % 8], "pick up the cup")
        trips, server_ms = [], []
        for i in range(args.requests):
            t0 = time.perf_counter()
            client.infer(obs[i % 8], "pick up the cup")
            trips.append(time.perf_counter() - t0)
            server_ms.append(client.last_server_timing.get("infer_ms", 0.0))
        client.close()
    finally:
        proc.terminate()
        proc.join(10)
    keys = RequestKeys()
    codec = []
    for i in range(args.requests):
        t0 = time.perf_counter()
        request = unpackb(packb(keys.request(obs[i % 8], "pick up the cup", None)))
        unpackb(packb({"actions": np.zeros((50, 7), np.float32), "server_timing": {"infer_ms": 0.0}}))
        codec.append(time.perf_counter() - t0)
    assert request["observation/images/base"].shape == SHAPE
    request_bytes = len(packb(keys.request(obs[0], "pick up the cup", None)))
    rows = {"round_trip_ms": percentiles(trips), "codec_only_ms": percentiles(codec),
            "server_infer_ms_p50": float(np.median(server_ms)), "request_bytes": request_bytes,
            "requests": args.requests}
    print(f"request {request_bytes / 1e3:.0f} kB (2 x 224^2 frames + state + text), reply [50, 7] float32")
    print(f"round trip localhost p50 / p99: {rows['round_trip_ms'][0]:.2f} / {rows['round_trip_ms'][1]:.2f} ms")
    codec_p50, codec_p99 = rows["codec_only_ms"]
    print(f"encode + decode only (no socket) p50 / p99: {codec_p50:.3f} / {codec_p99:.3f} ms")
    print("result:", write_result("policy_server", rows, args.out, tables=tables(rows)))


if __name__ == "__main__":
    main()
