"""Looking at datasets: per-episode statistics and an episode rendered to a GIF or MP4.

Works on any replay store (demo datasets, a run's ``replay.zarr``); success labels and re-simulation need the
``dataset.json`` that :func:`robot_rl.datasets.record.record_demos` writes.

Video: a dataset with cameras is played back from its stored frames (all cameras side by side unless one is
chosen). A state-only dataset has no frames; when it was recorded by ``record-demos`` (env id, kwargs and each
episode's reset seed are stored) the episode is re-simulated: the env is reset with the recorded seed and the
stored actions are replayed, rendering each step. The replayed states are compared with the stored ones and the
largest difference is reported (0 on the machine that recorded; MuJoCo results can differ across builds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from robot_rl.datasets.record import read_meta
from robot_rl.envs.make import EnvConfig, make_env
from robot_rl.replay.store import ReplayStoreError, load_transitions
from robot_rl.utils.video import upscale, write_video


def _partitions(path: Path) -> dict[str, dict[str, Any]]:
    commit = path / "commit.json"
    if not commit.is_file():
        raise ReplayStoreError(f"{path} is not a complete replay store or demo dataset (no commit.json)")
    return json.loads(commit.read_text())["partitions"]


def dataset_stats(path: str | Path) -> list[dict[str, Any]]:
    """One dict per episode: ``episode``, ``partition``, ``length``, ``return``, ``success`` (None when the
    dataset carries no labels), ``label`` (who labelled it: ``key`` = the operator, ``env`` = the task; None when
    unknown), ``seconds`` and ``held_steps`` (human recordings: wall time, steps paused or disconnected),
    ``terminated``, ``reset_seed`` (None when unknown), ``action_abs`` (mean |action|) and ``intervened`` (steps
    a human steered). Reads only the low-dim columns, so it is cheap on large pixel stores."""
    path = Path(path)
    meta = read_meta(path)
    labels = {e["episode_id"]: e for e in meta["episodes"]} if meta else {}
    root = zarr.open_group(str(path), mode="r")
    out = []
    for partition, counters in _partitions(path).items():
        size = int(counters["size"])
        if size == 0:
            continue
        cols = {k: root[f"{partition}/{k}"][:size]
                for k in ("episode_id", "reward", "valid", "terminated", "action", "intervened")}
        valid = cols["valid"]
        ids = cols["episode_id"][valid]
        uniq, first = np.unique(ids, return_index=True)
        for ep in uniq[np.argsort(first)]:
            sel = ids == ep
            label = labels.get(int(ep), {}) if partition == (meta or {}).get("partition") else {}
            out.append({"episode": int(ep), "partition": partition, "length": int(sel.sum()),
                        "return": float(cols["reward"][valid][sel].sum()),
                        "success": label.get("success"), "label": label.get("label"),
                        "seconds": label.get("seconds"), "held_steps": label.get("held_steps"),
                        "terminated": bool(cols["terminated"][valid][sel].any()),
                        "reset_seed": label.get("reset_seed"),
                        "action_abs": float(np.abs(cols["action"][valid][sel]).mean()),
                        "intervened": int(cols["intervened"][valid][sel].sum())})
    return out


def _episode_rows(arrays: dict[str, np.ndarray], episode: int, path: Path, partition: str) -> np.ndarray:
    rows = np.flatnonzero(arrays["valid"] & (arrays["episode_id"] == episode))
    if len(rows) == 0:
        known = np.unique(arrays["episode_id"][arrays["valid"]])
        raise ValueError(f"{path}: no episode {episode} in partition {partition!r} "
                         f"(episodes {known.min()}..{known.max()})" if len(known) else f"{path}: no episodes")
    return rows[np.argsort(arrays["step"][rows], kind="stable")]


def render_episode(path: str | Path, episode: int, out_file: str | Path, camera: str | None = None,
                   fps: float | None = None, scale: int = 1, size: int = 256,
                   partition: str | None = None) -> dict[str, Any]:
    """Writes episode ``episode`` to ``out_file`` (``.gif`` / ``.mp4``); returns what was written.

    ``camera``: one camera (default: all cameras side by side); ``fps``: default the recorded control rate;
    ``scale``: integer nearest-neighbour enlargement; ``size``: render side when re-simulating a state-only
    episode. Returns ``path``, ``frames``, ``height``, ``width``, ``source`` (``pixels`` | ``resimulated``)
    and, when re-simulated, ``max_state_error``.
    """
    path = Path(path)
    meta = read_meta(path)
    parts = _partitions(path)
    partition = partition or (meta or {}).get("partition") or ("demos" if "demos" in parts else next(iter(parts)))
    spec, _, arrays = load_transitions(path, partition)
    rows = _episode_rows(arrays, episode, path, partition)
    frame_rows = np.append(rows, arrays["next_row"][rows[-1]])
    result: dict[str, Any] = {}
    if spec.cameras:
        cams = [camera] if camera else list(spec.cameras)
        for cam in cams:
            if cam not in spec.cameras:
                raise ValueError(f"{path}: no camera {cam!r} (cameras: {', '.join(spec.cameras)})")
        frames = np.concatenate([arrays[f"pixels/{c}"][frame_rows] for c in cams], axis=2)
        result["source"] = "pixels"
    else:
        frames, err = _resimulate(path, meta, episode, arrays["action"][rows], arrays["state"][frame_rows],
                                  camera, size)
        result.update(source="resimulated", max_state_error=err)
    frames = upscale(frames, scale)
    fps = fps or float((meta or {}).get("fps") or 20)
    write_video(frames, out_file, fps)
    result.update(path=Path(out_file), frames=len(frames), height=int(frames.shape[1]), width=int(frames.shape[2]),
                  fps=fps)
    return result


def _resimulate(path: Path, meta: dict[str, Any] | None, episode: int, actions: np.ndarray, states: np.ndarray,
                camera: str | None, size: int) -> tuple[np.ndarray, float]:
    """Frames of a state-only episode: reset with its recorded seed, replay its stored actions, render."""
    label = next((e for e in (meta or {}).get("episodes", []) if e["episode_id"] == episode), None)
    if meta is None or label is None or label.get("reset_seed") is None:
        raise ValueError(f"{path} stores no camera frames and no recording record (env id, reset seed) for "
                         f"episode {episode}, so it cannot be shown as video: record a pixel dataset "
                         "(robot-rl record-demos TASK --image-size 64) or one with record-demos")
    env = make_env(EnvConfig(id=meta["env_id"], kwargs=dict(meta.get("env_kwargs") or {})), render_mode="rgb_array")
    try:
        sim = env.unwrapped
        if hasattr(sim, "render_camera"):
            names = list(getattr(sim, "cameras", ()) or getattr(sim, "default_cameras", ()))
            if camera is not None:
                import mujoco  # lazy: MuJoCo only to check a sim camera's name

                if mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_CAMERA, camera) < 0:
                    raise ValueError(f"{meta['env_id']}: no camera {camera!r}")
                names = [camera]

            def grab() -> np.ndarray:
                return np.concatenate([sim.render_camera(c, size).copy() for c in names], axis=1)
        else:
            def grab() -> np.ndarray:
                return np.asarray(env.render())
        # Recording drew the expert's noise from the env's generator each step; drawing it again keeps any
        # later random draws of the env (e.g. observation noise) identical to the recording.
        redraw = meta.get("device") == "scripted" and callable(getattr(sim, "expert_action", None))
        obs, _ = env.reset(seed=int(label["reset_seed"]))
        frames, replayed = [grab()], [obs["state"]]
        for action in actions:
            if redraw:
                sim.expert_action(float(meta.get("noise", 0.0)))
            obs, *_ = env.step(action)
            frames.append(grab())
            replayed.append(obs["state"])
    finally:
        env.close()
    err = float(np.max(np.abs(np.asarray(replayed, np.float64) - states))) if len(states) else 0.0
    return np.stack(frames), err
