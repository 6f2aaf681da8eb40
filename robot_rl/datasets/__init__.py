"""Demonstration datasets: record them with a device (the scripted expert, or a person on a keyboard, gamepad,
SpaceMouse or ROS 2 teleop input), generate them reproducibly on first use, look at them (per-episode stats,
GIF/MP4 of an episode) and drop episodes afterwards.

Datasets are replay stores (``robot_rl.replay.store``) with a ``demos`` partition plus ``dataset.json``; load them
into training with ``robot_rl.replay.add_dataset(replay, path)``.
"""

from robot_rl.datasets.edit import discard_episodes
from robot_rl.datasets.record import (
    DEFAULT_NOISE,
    DEVICES,
    DeviceUnavailableError,
    RecordStats,
    dataset_name,
    ensure_demos,
    read_meta,
    record_demos,
    resolve_env_id,
)
from robot_rl.datasets.show import dataset_stats, render_episode

__all__ = [
    "DEFAULT_NOISE", "DEVICES", "DeviceUnavailableError", "RecordStats", "dataset_name", "dataset_stats",
    "discard_episodes", "ensure_demos", "read_meta", "record_demos", "render_episode", "resolve_env_id",
]
