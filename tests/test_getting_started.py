"""Getting started as a newcomer types it, after the quick start: a fresh login shell with nothing of this test's
environment (no venv on the PATH), the page's own step that puts ``robot-rl`` on the PATH, then its runnable first
commands, literally, from the repository root."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
def test_the_first_commands_run_as_written_in_a_fresh_login_shell(tmp_path):
    page = (ROOT / "docs" / "getting-started.md").read_text()
    section = page[page.index("## First commands"):]
    section = section[:section.index("\n## ", 1)]
    path_step = re.search(r"```bash\n(source \.venv/bin/activate\n)```", section)
    assert path_step, "Getting started no longer says how to put robot-rl on the PATH"
    runnable = re.findall(r"<!-- run -->\n```bash\n(.*?)```", section, re.S)
    assert runnable, "Getting started's first commands have no runnable block"
    script = path_step.group(1) + "".join(runnable)
    shell = subprocess.run(["bash", "--login", "-e", "-c", script], cwd=ROOT, capture_output=True, text=True,
                           timeout=240, env={"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin",
                                             "LANG": "C.UTF-8", "TERM": "dumb"})
    assert shell.returncode == 0, shell.stderr[-3000:]
    assert "robot-rl train" in shell.stdout and "command not found" not in shell.stderr, shell.stdout[-2000:]
