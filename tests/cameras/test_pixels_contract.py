"""The robot side and the sims produce the same ``obs['pixels']``: a CameraRig of real cameras (OpenCV replaying
a video file) against a MuJoCo task rendering its cameras, checked against the observation contract."""

from __future__ import annotations

import pytest

pytest.importorskip("cv2", reason="opencv not installed (pip install -e '.[cameras]')")

from robot_rl.cameras import CameraConfig, CameraRig, RigConfig  # noqa: E402
from robot_rl.spaces import ObsSpec  # noqa: E402
from robot_rl_sim.arm_tasks import PickCubeEnv  # noqa: E402
from tests.cameras.test_opencv import write_video  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def test_rig_pixels_match_the_sim_contract(tmp_path):
    path = write_video(tmp_path / "cam.avi", frames=10, size=(120, 160))
    cams = tuple(CameraConfig(name=n, device=str(path), loop=True, fps=30, crop=(20, 0, 120, 120), resize=(64, 64))
                 for n in ("front", "wrist"))
    env = PickCubeEnv(image_size=64)
    try:
        sim_obs, _ = env.reset(seed=0)
        sim_space = env.observation_space
    finally:
        env.close()
    with CameraRig(RigConfig(cameras=cams, max_skew=0.05, sync_timeout=0.2)) as rig:
        reading = rig.read()
        space = rig.observation_space()
    assert space == sim_space["pixels"], "the rig declares exactly the sims' pixels space"
    assert space.contains(reading.pixels) and sim_space["pixels"].contains(sim_obs["pixels"])
    for name in ("front", "wrist"):
        a, b = reading.pixels[name], sim_obs["pixels"][name]
        assert a.shape == b.shape and a.dtype == b.dtype and a.flags.writeable == b.flags.writeable
    obs = {"state": sim_obs["state"], "pixels": reading.pixels}
    spec = ObsSpec.from_space(sim_space)
    assert spec.cameras == {n: (64, 64, 3) for n in ("front", "wrist")} and spec.to_space().contains(obs)
