"""Camera configs come from YAML like every other config: types checked, tuples converted, bad values named."""

from __future__ import annotations

import pytest
import yaml

from robot_rl.cameras import CameraConfig, RigConfig
from robot_rl.config import ConfigError, from_dict, to_dict

YAML = """
max_skew: 0.015
cameras:
  - {name: front, source: realsense, serial: "123456789", depth: true, exposure: 150, resize: [128, 128]}
  - {name: wrist, source: opencv, device: /dev/video2, crop: [80, 0, 480, 480], resize: [128, 128]}
  - {name: top, source: ros, topic: /top/image_raw/compressed, compressed: true, resize: [96, 128]}
"""


def test_rig_config_from_yaml_and_back():
    cfg = from_dict(RigConfig, yaml.safe_load(YAML))
    front, wrist, top = cfg.cameras
    assert front.serial == "123456789" and front.depth and front.exposure == 150.0
    assert wrist.crop == (80, 0, 480, 480) and wrist.output_shape() == (128, 128, 3)
    assert top.output_shape() == (96, 128, 3) and top.compressed
    assert CameraConfig(crop=(0, 0, 100, 50)).output_shape() == (50, 100, 3)
    assert CameraConfig(width=320, height=240).output_shape() == (240, 320, 3)
    assert from_dict(RigConfig, to_dict(cfg)) == cfg


@pytest.mark.parametrize("bad, match", [
    ({"cameras": [{"name": "a", "source": "firewire"}]}, "source must be one of"),
    ({"cameras": [{"name": "a", "crop": [0, 0, 0, 10]}]}, "crop must be"),
    ({"cameras": [{"name": "a", "resize": [128]}]}, r"cameras\[0\].resize: expected 2 values"),
    ({"cameras": [{"name": "a", "source": "ros"}]}, "needs a topic"),
    ({"cameras": [{"name": "a"}, {"name": "a"}]}, "unique"),
    ({"cameras": [{"name": "a", "fps": "fast"}]}, r"cameras\[0\].fps: expected float"),
])
def test_bad_camera_config_is_named(bad, match):
    with pytest.raises((ConfigError, ValueError), match=match):
        from_dict(RigConfig, bad)
