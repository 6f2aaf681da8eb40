"""Generated reference pages are current: regenerating them changes nothing (edit the dataclasses, then run the
script the page names)."""

from __future__ import annotations

from pathlib import Path

from robot_rl.utils.field_docs import ROS_NODES, field_rows, ros_reference

ROOT = Path(__file__).resolve().parents[1]


def test_the_ros_parameter_reference_is_current_and_complete():
    page = (ROOT / "docs/reference/ros2-parameters.md").read_text()
    assert page == ros_reference(), "run: bash scripts/gen_ros_reference.sh"
    from robot_rl.utils.imports import import_object

    for target in ROS_NODES.values():
        rows = field_rows(import_object(target, "config class"))
        assert rows and all(doc for *_, doc in rows), [name for name, *_, doc in rows if not doc]
        assert all(f"`{name}`" in page for name, *_ in rows)


def test_the_docs_site_builds_strictly(tmp_path):
    """mkdocs build --strict: every page in the nav, no broken link."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site/index.html").is_file() and (tmp_path / "site/guides/ros2/index.html").is_file()
