"""LeRobot's own reader and writer on the other side (the lowest-torch leg, scripts/test_lowest.sh, installs
lerobot beside robot_rl; skipped where lerobot is not installed): robot_rl's export read with ``LeRobotDataset``
(task strings, states, actions, frames within codec error, episode boundaries), and a dataset written with
LeRobot's API (``create`` / ``add_frame`` / ``save_episode``, an image camera) imported by robot_rl."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lerobot")

from robot_rl.datasets.convert import export_dataset, import_dataset  # noqa: E402
from robot_rl.datasets.episodes import read_episodes  # noqa: E402
from robot_rl.datasets.record import record_demos  # noqa: E402

KWARGS = {"image_size": 32, "object_state": False}


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demos") / "pick.zarr"
    record_demos("robot_rl/PickColor-v0", 2, path, env_kwargs=KWARGS, progress=False)
    return path


def test_lerobots_reader_on_robot_rls_export(demos, tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    export_dataset(demos, tmp_path / "le")
    ds = LeRobotDataset("local/pick", root=tmp_path / "le", video_backend="pyav")
    _, _, episodes = read_episodes(demos)
    episodes = list(episodes)
    assert ds.num_episodes == len(episodes) and ds.num_frames == sum(ep.length + 1 for ep in episodes)
    start = 0
    for k, ep in enumerate(episodes):
        n = ep.length + 1
        first, last = ds[start], ds[start + n - 1]
        assert int(first["episode_index"]) == k and int(last["episode_index"]) == k
        assert first["task"] == ep.instruction and ds.meta.get_task_index(ep.instruction) is not None
        np.testing.assert_array_equal(first["observation.state"].numpy(), ep.observations["state"][0])
        np.testing.assert_array_equal(first["action"].numpy(), ep.action[0])
        frame = (first["observation.images.front"].numpy().transpose(1, 2, 0) * 255).round()
        assert np.abs(frame - ep.observations["pixels/front"][0]).mean() < 8  # AV1 at crf 30
        start += n


def test_lerobots_default_video_decoder_reads_the_export(demos, tmp_path):
    """What a LeRobot user runs without options: its default decoder (torchcodec, on FFmpeg's shared libraries,
    which scripts/test_lowest.sh installs with a torchcodec built for its torch)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    export_dataset(demos, tmp_path / "le")
    ds = LeRobotDataset("local/pick", root=tmp_path / "le")
    assert ds.video_backend == "torchcodec", ds.video_backend
    _, _, episodes = read_episodes(demos)
    first_episode = next(iter(episodes))
    frame = (ds[0]["observation.images.front"].numpy().transpose(1, 2, 0) * 255).round()
    assert np.abs(frame - first_episode.observations["pixels/front"][0]).mean() < 8  # AV1 at crf 30


def test_a_dataset_written_with_lerobots_api_imports(tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = {"observation.state": {"dtype": "float32", "shape": (3,), "names": None},
                "action": {"dtype": "float32", "shape": (2,), "names": None},
                "observation.images.top": {"dtype": "image", "shape": (16, 16, 3),
                                           "names": ["height", "width", "channels"]}}
    ds = LeRobotDataset.create("local/written", fps=10, features=features, root=tmp_path / "w", use_videos=False)
    rng = np.random.default_rng(0)
    written = []
    for n, task in ((4, "stack the blocks"), (3, "open the drawer")):
        frames = [{"observation.state": rng.normal(size=3).astype(np.float32),
                   "action": rng.normal(size=2).astype(np.float32),
                   "observation.images.top": rng.integers(0, 256, (16, 16, 3), np.uint8), "task": task}
                  for _ in range(n)]
        for frame in frames:
            ds.add_frame(frame)
        ds.save_episode()
        written.append((task, frames))
    ds.finalize()
    import_dataset(tmp_path / "w", tmp_path / "back.zarr")
    spec, action_dim, episodes = read_episodes(tmp_path / "back.zarr")
    assert spec.cameras == {"top": (16, 16, 3)} and spec.state_dim == 3 and action_dim == 2
    for ep, (task, frames) in zip(episodes, written, strict=True):
        assert ep.instruction == task and ep.length + 1 == len(frames)
        np.testing.assert_array_equal(ep.observations["state"], np.stack([f["observation.state"] for f in frames]))
        np.testing.assert_array_equal(ep.observations["pixels/top"],
                                      np.stack([f["observation.images.top"] for f in frames]))  # PNG: lossless


def test_no_page_says_lerobot_cannot_be_installed_beside_robot_rl() -> None:
    """This environment has both (one pip call in scripts/test_lowest.sh): a page saying otherwise is stale."""
    import re

    root = Path(__file__).resolve().parents[2]
    stale = re.compile(r"LeRobot[^.]{0,80}\b(?:cannot|can't|can not|could not)\b[^.]{0,40}\binstall|"
                       r"\b(?:cannot|can't|can not|could not)\b[^.]{0,40}\binstall[^.]{0,80}LeRobot", re.I | re.S)
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found = [f"{p.relative_to(root)}: {m.group(0)!r}" for p in pages if "design" not in p.parts
             for m in stale.finditer(p.read_text())]
    assert not found, found
