"""robot_rl's own sim tasks registered with gymnasium on demand (the ``robot_rl/<Task>-v0`` ids), for the env
pipeline (robot_rl.envs.make) and the raw batched sims (robot_rl.envs.batched)."""

from __future__ import annotations


def register_builtin(env_id: str) -> None:
    """Registers robot_rl's own sim tasks when ``env_id`` names one."""
    if env_id.startswith("robot_rl/"):
        import robot_rl_sim  # noqa: F401  (registers the sim tasks; the sims load MuJoCo, only when asked for)
