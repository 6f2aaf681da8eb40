"""The docs' code cannot rot: every fenced block marked ``<!-- run -->`` in docs/ (a Python or bash block that runs
on a CPU in seconds, with no hardware and no network) is executed, each in a fresh empty folder with the venv's
``bin`` first on PATH, and must exit 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^<!-- run -->\n```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)
RUNNERS = {"python": [sys.executable, "-"], "py": [sys.executable, "-"], "bash": ["bash", "-e", "-"],
           "sh": ["bash", "-e", "-"]}


def marked_blocks() -> list[tuple[str, str, str]]:
    """``(page:line, language, code)`` of every marked block."""
    out = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        for match in BLOCK.finditer(text):
            line = text[:match.start()].count("\n") + 2
            out.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return out


BLOCKS = marked_blocks()


def test_the_guides_have_runnable_blocks_and_every_marker_is_followed_by_a_block():
    markers = sum(p.read_text().count("<!-- run -->") for p in (ROOT / "docs").rglob("*.md"))
    assert BLOCKS and markers == len(BLOCKS), "a <!-- run --> marker must sit directly above a fenced block"
    assert all(lang in RUNNERS for _, lang, _ in BLOCKS), {lang for _, lang, _ in BLOCKS} - set(RUNNERS)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("where,lang,code", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_marked_docs_block_runs(where, lang, code, tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    out = subprocess.run(RUNNERS[lang], input=code, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=150)
    assert out.returncode == 0, f"{where} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
