"""The docs site: generated pages are current (regenerating them changes nothing; edit the dataclasses or the result
files, then run ``bash scripts/gen_docs.sh``), the configuration reference covers every field of every config
dataclass, and ``mkdocs build --strict`` passes."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl.reference_docs import PAGES, config_targets, render
from robot_rl.utils.field_docs import ROS_NODES, field_rows
from robot_rl.utils.imports import import_object

ROOT = Path(__file__).resolve().parents[1]
FIX = "run: bash scripts/gen_docs.sh"


@pytest.mark.parametrize("page", ["config", "ros", "cli"])
def test_the_generated_reference_pages_are_current(page):
    assert (ROOT / PAGES[page]).read_text() == render(page), FIX


def _section_of(page: str, class_name: str) -> str:
    start = page.index(f"\n### {class_name}\n")
    end = page.find("\n### ", start + 1)
    return page[start:end if end > 0 else None]


def test_the_config_reference_covers_every_field_of_every_config_dataclass():
    targets = config_targets()
    # the discovery finds the configs a user sets, wherever they live
    for expected in ("robot_rl.training.config:TrainConfig", "robot_rl.agents.config:SACConfig",
                     "robot_rl.envs.config:EnvConfig", "robot_rl.replay.buffer:ReplayConfig",
                     "robot_rl.teleop.config:TeleopConfig", "robot_rl.robots.camera:CameraConfig",
                     "robot_rl_sim.arm_env:ArmTaskConfig", "robot_rl_controllers.ros_safety_config:ArmSafetyConfig",
                     "robot_rl.safety.limits:ArmLimits"):
        assert expected in targets
    page = (ROOT / PAGES["config"]).read_text()
    undocumented = []
    for target in targets:
        cls = import_object(target, "config class")
        section = _section_of(page, cls.__name__)
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in section, f"{target}.{f.name} is not in {PAGES['config']} ({FIX})"
        undocumented += [f"{target}.{name}" for name, *_, doc in field_rows(cls, expand=False) if not doc]
    assert not undocumented, f"fields without a docstring under them: {undocumented}"


def test_the_ros_parameter_reference_lists_every_parameter():
    page = (ROOT / PAGES["ros"]).read_text()
    for target in ROS_NODES.values():
        rows = field_rows(import_object(target, "config class"))
        assert rows and all(f"`{name}`" in page for name, *_ in rows)


def test_the_benchmark_pages_are_rendered_from_the_current_result_files():
    """Every result file is shown on a page, every page is current, and every benchmark script writes a result."""
    out = subprocess.run([sys.executable, "benchmarks/render.py", "--check"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    helpers = {"common.py", "render.py", "synthetic_chunks.py", "finetune_tables.py"}
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name not in helpers:
            assert "write_result(" in script.read_text(), f"{script.name} writes no result file"


def _render_module():
    spec = importlib.util.spec_from_file_location("benchmarks_render", ROOT / "benchmarks/render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_compare_marker_sets_the_tables_of_several_result_files_side_by_side(monkeypatch):
    render = _render_module()
    source = {"command": "python x.py", "commit": "abc1234", "date": "2026-01-01T00:00:00", "machine":
              {"cpu": "CPU", "cores": 2}}
    records = {
        "one": {**source, "figures": {"env_steps": 5000, "seeds": [0, 1, 2], "tables": [
            {"columns": ["method", "base", "final"], "rows": [["residual", "0.40", "0.90"]]}]}},
        "two": {**source, "command": "python y.py", "figures": {"tables": [
            {"title": "first", "columns": ["x"], "rows": [["unused"]]},
            {"columns": ["method", "seeds", "final", "extra"], "rows": [["rlpd", "3", "1.00", "a|b"],
                                                                         ["steer", "3", "0.30", "c"]]}]}},
    }
    monkeypatch.setattr(render, "load_result", records.__getitem__)
    used: set[str] = set()
    text = render.render_template('{{ compare one="Task A, residual"\n    two:1="Task B" }}', used)
    lines = text.splitlines()
    assert used == {"one", "two"}
    # the columns matched by name in order of appearance, an env-steps column, the seeds counted where missing
    assert lines[0] == "| run | env steps | base | final | seeds | extra | source |"
    assert lines[2] == "| Task A, residual | 5000 | 0.40 | 0.90 | 3 | - | [1] |"
    assert lines[3] == r"| Task B: rlpd | - | - | 1.00 | 3 | a\|b | [2] |"
    assert lines[4] == "| Task B: steer | - | - | 0.30 | 3 | c | [2] |"
    assert "[1] Command: <code>python x.py</code>" in text and "[2] Command: <code>python y.py</code>" in text


def test_the_readme_results_are_cells_of_the_result_files(monkeypatch, tmp_path):
    """The README's results table is generated: each ``cell`` marker is one cell of a result table (by column index
    or name; whole, or its K-th number), and the machines of the cited files are listed."""
    render = _render_module()
    record = {"machine": {"cpu": "CPU X", "cores": 2}, "figures": {"tables": [
        {"columns": ["what", "figure"], "rows": [["speed", "p50 **2.0 ms**, 14,309 /s"]]}]}}
    monkeypatch.setattr(render, "load_result", {"one": record}.__getitem__)
    template = tmp_path / "readme_results.md"
    template.write_text('{{ cited machines }}: {{ cell one:0:0:1:1 }} ms, {{ cell one:0:0:"figure":2 }}, '
                        '"{{ cell one:0:0:0 }}"\n')
    monkeypatch.setattr(render, "README_TEMPLATE", template)
    used: set[str] = set()
    assert render.render_readme_results(used) == 'CPU X (2 cores): 2.0 ms, 14,309, "speed"' and used == {"one"}
    with pytest.raises(SystemExit, match="has no number 5"):
        render.cell_text("one", "0", "0", "1", "5")


def test_the_docs_site_builds_strictly(tmp_path):
    """mkdocs build --strict: every page in the nav, no broken link, the API reference rendered."""
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site/index.html").is_file() and (tmp_path / "site/guides/ros2/index.html").is_file()
    api = (tmp_path / "site/reference/api/index.html").read_text()
    assert "ReplayBuffer" in api and "doc-heading" in api
    # a field name is the code of a table's first cell, which extra.css keeps on one line (test_docs_width.py)
    assert "<td><code>actor_resource</code></td>" in (tmp_path / "site/reference/config/index.html").read_text()
    # what a reader would see as broken: a Sphinx role or an RST literal left raw, a table row rendered as text
    role = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj):")
    row_as_text = re.compile(r"<p>(?:(?!</p>).)*?^\| .* \|$", re.S | re.M)
    faults = []
    for page in sorted((tmp_path / "site").rglob("*.html")):
        html = page.read_text()
        name = str(page.relative_to(tmp_path / "site"))
        faults += [f"{name}: raw Sphinx role {m.group(0)}" for m in role.finditer(html)][:3]
        faults += [f"{name}: raw ``literal``" for _ in re.finditer("``", html)][:1]
        faults += [f"{name}: a table row as text" for _ in row_as_text.finditer(html)][:1]
    assert not faults, faults[:20]


def test_no_page_is_titled_by_its_file_name_and_search_ranks_guides_above_design_records(tmp_path):
    """A page whose first line is not its heading (a generated comment above it) gets its file name as title: each
    page is titled by its nav label or its heading. Design
    records carry a lower search boost than guides; nothing on a page asks a server outside the site (Material's
    repository facts call the GitHub API when ``repo_url`` is set)."""
    import html as html_lib
    import json

    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    import yaml

    def nav_labels(entries: list) -> dict[str, str]:
        out: dict[str, str] = {}
        for entry in entries:
            for label, target in (entry.items() if isinstance(entry, dict) else []):
                out.update(nav_labels(target) if isinstance(target, list) else {target: label})
        return out

    labels = nav_labels(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    site, wrong = tmp_path / "site", []
    for page in sorted(site.rglob("index.html")):
        html = page.read_text()
        title = html_lib.unescape(re.search(r"<title>(.*?)(?: - robot_rl)?</title>", html).group(1))
        h1 = re.search(r"<h1[^>]*>(.*?)</h1>", html, re.S)
        heading = html_lib.unescape(re.sub(r"<[^>]+>", "", h1.group(1))).rstrip("¶").strip() if h1 else None
        rel = page.parent.relative_to(site).as_posix()
        label = labels.get(f"{rel}.md", labels.get(f"{rel}/index.md" if rel != "." else "index.md"))
        if heading and title not in (heading, label):
            wrong.append(f"{page.relative_to(site)}: title {title!r}, heading {heading!r}")
        assert "data-md-component=\"source\"" not in html and "api.github.com" not in html, page
    assert not wrong, wrong
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    boost = {d["location"].split("#")[0]: d.get("boost", 1) for d in docs if "#" not in d["location"]}
    assert boost["design/finetuning-ibrl/"] < boost["guides/ros2-robots/"] == 1, boost
