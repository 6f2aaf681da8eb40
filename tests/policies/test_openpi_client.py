"""openpi's own client beside robot_rl, installed as the generalist guide says: openpi-client 0.1.2 pins numpy<2,
which robot_rl's zarr cannot take, so it goes in without its dependencies and its one missing requirement (dm-tree)
after; robot_rl's numpy stays, and openpi's ``WebsocketClientPolicy`` gets action chunks from ``robot-rl``'s policy
server. The client goes into a fresh virtual environment that reaches this one's packages through a ``.pth`` line
(this environment is left as it was)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig

import pytest

from robot_rl.policies.server import PolicyServer
from tests.policies.test_server import CAMS, EchoPolicy

INSTALL = [["--no-deps", "openpi-client>=0.1.2"], ["dm-tree>=0.1.8"]]  # docs/guides/generalist-policies.md
CLIENT = """
import json, sys
import numpy as np
from openpi_client import websocket_client_policy
policy = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=int(sys.argv[1]))
obs = {"observation/state": np.linspace(-1, 1, 11).astype(np.float32), "prompt": "pick up the red cube",
       **{f"observation/images/{c}": np.full(s, 7, np.uint8) for c, s in json.loads(sys.argv[2]).items()}}
actions = policy.infer(obs)["actions"]
print(json.dumps({"shape": list(actions.shape), "numpy": np.__version__, "meta": policy.get_server_metadata()}))
"""


@pytest.mark.timeout(300)
def test_openpi_client_installs_beside_robot_rl_and_talks_to_its_policy_server(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "venv" / site.split(str(venv) + "/", 1)[1] / "deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    for args in INSTALL:
        done = subprocess.run([str(py), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
    server = PolicyServer(EchoPolicy(), port=0)
    port = server.start()
    try:
        out = subprocess.run([str(py), "-c", CLIENT, str(port), json.dumps(CAMS)], capture_output=True, text=True,
                             timeout=120)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["shape"] == [8, 4] and got["meta"]["robot_rl"]["action_dim"] == 4, got
    assert int(got["numpy"].split(".")[0]) >= 2, got  # robot_rl's numpy, not the client's pin
