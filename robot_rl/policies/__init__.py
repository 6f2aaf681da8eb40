"""Base (generalist) policies: the contract (:mod:`.base`), the policy server and its client (openpi's websocket
protocol), LeRobot policies, and chunked execution (:mod:`.executor`)."""

from robot_rl.policies.base import BasePolicy, PolicyError, PolicyMetadata
from robot_rl.policies.config import BasePolicyConfig, ExecutionConfig, RequestKeys

__all__ = ["BasePolicy", "BasePolicyConfig", "ExecutionConfig", "PolicyError", "PolicyMetadata", "RequestKeys"]
