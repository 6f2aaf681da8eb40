"""Replay: partitioned in-RAM ring storage with frames stored once, mixed sampling, zarr persistence."""

from robot_rl.replay.buffer import PARTITIONS, ReplayBuffer, ReplayConfig
from robot_rl.replay.storage import RingStorage
from robot_rl.replay.store import (
    EpisodeWriter,
    ReplayStoreError,
    add_dataset,
    load_buffer,
    load_transitions,
    save_buffer,
)

__all__ = ["PARTITIONS", "EpisodeWriter", "ReplayBuffer", "ReplayConfig", "ReplayStoreError", "RingStorage",
           "add_dataset", "load_buffer", "load_transitions", "save_buffer"]
