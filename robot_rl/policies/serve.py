"""Serving a base policy: what ``robot-rl serve-policy`` runs, and a command of its own for an environment that
holds LeRobot and not robot_rl's dependencies.

    python -m robot_rl.policies.serve lerobot:<type>:<folder> [--host 127.0.0.1] [--port 8000]
        [--token-env ROBOT_RL_POLICY_TOKEN] [--max-message-mb 64] [--device cpu]

In such an environment (e.g. LeRobot 0.6 on Python 3.12 beside a robot running robot_rl elsewhere), install
robot_rl without its dependencies plus the wire's two: ``pip install --no-deps robot-rl && pip install msgpack
websockets``. This path imports only the standard library, numpy, torch, lerobot and those two (a test blocks
everything else). The flags are ``robot-rl serve-policy``'s.
"""

from __future__ import annotations

import argparse
import json
import sys

from robot_rl.policies.client import token_from_env
from robot_rl.policies.config import BasePolicyConfig
from robot_rl.policies.loader import load_policy
from robot_rl.policies.server import PolicyServer
from robot_rl.utils.log import get_logger, setup_logging

log = get_logger("robot_rl.policies.serve")
LOCAL = ("127.0.0.1", "localhost", "::1")


def serve(policy_path: str, host: str = "127.0.0.1", port: int = 8000, token_env: str = "ROBOT_RL_POLICY_TOKEN",
          max_message_mb: float = 64.0, device: str = "cpu", metadata: dict | None = None) -> None:
    """Loads the policy and serves it until interrupted; ValueError / OSError when it cannot be loaded.
    ``metadata``: PolicyMetadata fields to set (a LeRobot policy's ``action_low`` / ``action_high``, its rate)."""
    policy = load_policy(BasePolicyConfig(path=policy_path, device=device, metadata=dict(metadata or {})))
    token = token_from_env(token_env)
    if host not in LOCAL and not token:
        log.warning("serving on %s without a token: anyone who can reach the port can drive this policy", host)
    server = PolicyServer(policy, host, port, token, max_message_bytes=int(max_message_mb * 2**20))
    log.info("serving %s on ws://%s:%d (health: http://%s:%d/healthz)%s", policy.metadata.name or policy_path,
             host, port, host, port, " with a token" if token else "")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robot_rl.policies.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", help="lerobot:<type>:<folder>, a saved policy folder or a ws:// URL (a relay)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 = every interface: set a token)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token-env", default="ROBOT_RL_POLICY_TOKEN",
                        help="environment variable holding the token clients must send (unset = no token)")
    parser.add_argument("--max-message-mb", type=float, default=64.0, help="largest request accepted (MB)")
    parser.add_argument("--device", default="cpu", help="torch device of a local policy")
    parser.add_argument("--metadata", type=json.loads, default={}, metavar="JSON",
                        help="policy metadata fields to set (a LeRobot policy's action_low / action_high)")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        serve(args.policy, args.host, args.port, args.token_env, args.max_message_mb, args.device, args.metadata)
    except (ValueError, OSError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
