"""``robot-rl datasets export`` / ``import``: robot_rl's replay-format stores <-> LeRobotDataset v3.0.

Export takes a demo dataset (``robot-rl record-demos``), a run folder (its latest checkpoint's replay: online,
demo and intervention partitions) or any replay store. Import writes a demo dataset (replay format with
``dataset.json``) that ``--demos PATH`` and ``robot-rl train-bc --datasets PATH`` take.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.config import ConfigError, from_dict, read_yaml
from robot_rl.datasets.atomic import publish, temp_path
from robot_rl.datasets.bag_demos import bag_episodes
from robot_rl.datasets.episodes import read_episodes
from robot_rl.datasets.lerobot import read_lerobot, write_lerobot
from robot_rl.datasets.record import META_FILE, META_FORMAT, META_VERSION, read_meta
from robot_rl.envs.config import EnvConfig
from robot_rl.envs.instructions import instruction_table
from robot_rl.envs.make import make_env
from robot_rl.replay.store import EpisodeWriter, store_spec
from robot_rl.spaces import ObsSpec, obs_row
from robot_rl.text import make_text_encoder
from robot_rl.utils.run_dir import latest_checkpoint


def resolve_store(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """A store to export and what is known of it (env id, fps): a demo dataset, a run folder or a replay store."""
    path = Path(path)
    if (path / "config.yaml").is_file() and (path / "checkpoints").is_dir():  # a run folder
        env, control_hz = run_env(path)
        return latest_checkpoint(path) / "replay.zarr", {"env_id": env.id, "fps": control_hz or 20,
                                                         "instruction": env.instruction, "run": True}
    if not (path / "commit.json").is_file():
        raise FileNotFoundError(f"{path} is neither a demo dataset, a replay store nor a run folder")
    meta = read_meta(path) or {}
    return path, {"env_id": meta.get("env_id", ""), "fps": meta.get("fps", 20), "instruction": ""}


def run_env(run: Path) -> tuple[EnvConfig, float]:
    """A run folder's env config and ``runtime.control_hz``, read from its ``config.yaml`` (the two parts of a run's
    TrainConfig an export needs; robot_rl.runtime sits above datasets in the package layers, so its TrainConfig is
    not imported here)."""
    path = run / "config.yaml"
    data = read_yaml(path)
    try:
        cfg = from_dict(EnvConfig, EnvConfig.prepare_raw(dict(data.get("env") or {}), run))
    except (ConfigError, ValueError) as exc:
        raise ConfigError(f"{path}: env: {exc}") from None
    return cfg, float((data.get("runtime") or {}).get("control_hz") or 0.0)


def export_dataset(path: str | Path, out: str | Path, partitions: list[str] | None = None,
                   robot_type: str | None = None) -> dict[str, Any]:
    """Writes the store at ``path`` (see :func:`resolve_store`) as a LeRobotDataset v3.0 at ``out``."""
    store, known = resolve_store(path)
    spec, _ = store_spec(store)
    texts = _run_instructions(Path(path)) if spec.instruction_dim and known.get("run") else None
    spec, action_dim, episodes = read_episodes(store, partitions, texts)
    fps = int(round(float(known["fps"])))
    return write_lerobot(episodes, spec, action_dim, out, fps, robot_type=robot_type or known["env_id"] or None,
                         default_task=known["instruction"])


def _run_instructions(run: Path) -> dict[str, np.ndarray]:
    """A run's instructions with their embeddings (its env, as configured), so exported episodes carry the text."""
    env_cfg, _ = run_env(run)
    env = make_env(env_cfg)
    try:
        return instruction_table(env_cfg, env)
    finally:
        env.close()


def import_dataset(folder: str | Path, out: str | Path, instruction_encoder: str = "hash",
                   env_id: str = "", fmt: str = "lerobot", object_state: bool = True,
                   cameras: tuple[str, ...] = ()) -> dict[str, Any]:
    """Writes a LeRobotDataset v3.0 (``fmt="lerobot"``) or recorded ROS 2 arm bags (``fmt="rosbag"``, see
    robot_rl.datasets.bag_demos: ``object_state`` and ``cameras`` choose the observation) as a robot_rl demo dataset
    at ``out``; returns its ``dataset.json``. Tasks become instructions (embedded with ``instruction_encoder``)
    when the dataset has more than an empty one."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists")
    if fmt == "lerobot":
        spec, action_dim, info, episodes = read_lerobot(folder)
        fps, source = info["fps"], {"codebase_version": info["codebase_version"]}
        env_id = env_id or info.get("robot_type") or ""
    elif fmt == "rosbag":
        spec, episodes = bag_episodes(folder, object_state=object_state, cameras=tuple(cameras))
        action_dim, fps, source = 4, 0, {"object_state": object_state, "cameras": list(cameras)}
        env_id = env_id or "robot_rl/RosArm-v0"
    else:
        raise ValueError(f"unknown format {fmt!r} (formats: lerobot, rosbag)")
    return _write_demos(list(episodes), spec, action_dim, out, instruction_encoder, env_id, fps,
                        {"path": str(folder), "format": fmt, **source})


def _write_demos(episodes: list, spec: ObsSpec, action_dim: int, out: Path, instruction_encoder: str, env_id: str,
                 fps: float, source: dict[str, Any]) -> dict[str, Any]:
    texts = sorted({e.instruction for e in episodes})
    encoder = make_text_encoder(instruction_encoder) if any(texts) else None
    if encoder is not None:
        spec = ObsSpec(spec.state_dim, spec.cameras, encoder.dim)
    tmp = temp_path(out)
    writer = EpisodeWriter(tmp, spec, action_dim, partition="demos")
    records = []
    names = tuple(spec.obs_arrays())
    for ep in episodes:
        if ep.length == 0:
            continue
        flat = dict(ep.observations)
        if encoder is not None:
            flat["instruction"] = np.tile(encoder.encode(ep.instruction), (ep.length + 1, 1)).astype(np.float32)
        observations = [obs_row(flat, names, i) for i in range(ep.length + 1)]
        writer.append(observations, ep.action, ep.reward, ep.terminated, ep.truncated, source="demo",
                      episode_id=len(records), intervened=ep.intervened)
        record = {"episode_id": len(records), "length": ep.length, "return": float(ep.reward.sum()),
                  "success": ep.success, "label": source["format"], "reset_seed": None}
        if ep.instruction:
            record["instruction"] = ep.instruction
        records.append(record)
    if not records:
        raise ValueError(f"{source['path']}: no episode with a transition to import")
    meta = {"format": META_FORMAT, "version": META_VERSION, "env_id": env_id, "env_kwargs": {},
            "device": source["format"], "noise": None, "seed": 0, "only_successes": False, "partition": "demos",
            "fps": fps, "complete": True, "attempts": len(records), "discarded": 0,
            "imported_from": {**source, "instruction_encoder": instruction_encoder if encoder else None},
            "episodes": records}
    (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
    publish(tmp, out, overwrite=False)
    return meta
