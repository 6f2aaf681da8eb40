"""The docs' pictures (``scripts/doc_pictures.py``, run by ``bash scripts/gen_docs.sh``): every picture a page shows
exists and is local, every task robot_rl ships has its frame on the tasks page, the pictures stay small, each
ROS 2 graph's SVG is the drawing of its JSON, which holds the nodes of the launch file it was read from, the
operator view's picture says what made it (rerun's viewer or matplotlib) and is on its guide, and the learning
curves are drawn from the current result files and shown on the benchmark pages. Nothing here renders: a stale
picture is fixed by ``python scripts/doc_pictures.py --force``."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FIX = "run: python scripts/doc_pictures.py (bash scripts/gen_docs.sh runs it)"
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|<img\b[^>]*\bsrc=\"([^\"]+)\"")
MAX_BYTES = {".png": 150_000, ".gif": 1_000_000, ".svg": 100_000, ".jpg": 150_000}


def _pictures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_pictures", ROOT / "scripts/doc_pictures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("doc_pictures", module)
    spec.loader.exec_module(module)
    return module


def shown_pictures(page: Path) -> list[str]:
    """The picture paths a markdown page shows (``![alt](path)`` and ``<img src="path">``)."""
    return [m.group(1) or m.group(2) for m in IMAGE.finditer(page.read_text())]


def test_pictures_are_found_in_both_forms():
    text = '![a](img/a.png)\n![b c](<../img/b.gif> "title")\n<img alt="c" src="img/c.svg">\n'
    assert [m.group(1) or m.group(2) for m in IMAGE.finditer(text)] == ["img/a.png", "../img/b.gif", "img/c.svg"]


def test_every_picture_a_page_shows_exists_and_is_local():
    faults, shown = [], 0
    for page in sorted(DOCS.rglob("*.md")):
        for target in shown_pictures(page):
            shown += 1
            name = f"{page.relative_to(ROOT)}: {target}"
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                faults.append(f"{name} is not a relative path (the site works offline)")
            elif not (page.parent / target).resolve().is_file():
                faults.append(f"{name} does not exist")
    assert shown >= 15, shown
    assert not faults, faults


def test_pictures_stay_small():
    big = [f"{p.relative_to(ROOT)}: {p.stat().st_size // 1000} kB > {MAX_BYTES[p.suffix] // 1000} kB"
           for p in sorted(DOCS.rglob("*")) if p.suffix in MAX_BYTES and p.stat().st_size > MAX_BYTES[p.suffix]]
    assert not big, big


def test_every_task_has_its_frame_on_the_tasks_page():
    pictures = _pictures()
    ids = pictures.task_ids()
    # the sim tasks (arm and car) and the gymnasium tasks of the bundled configs
    for expected in ("robot_rl/PickCube-v0", "robot_rl/Reach-v0", "robot_rl/PegInsert-v0", "robot_rl/PickColor-v0",
                     "robot_rl/Drive-v0", "Pendulum-v1", "HalfCheetah-v5"):
        assert expected in ids
    shown = {(DOCS / "guides" / t).resolve() for t in shown_pictures(DOCS / "guides/train-in-sim.md")}
    for env_id in ids:
        frame = DOCS / "img/tasks" / f"{pictures.slug(env_id)}.png"
        assert frame.is_file(), f"{env_id}: no {frame.relative_to(ROOT)} ({FIX})"
        assert frame.resolve() in shown, f"{env_id}: its frame is not on docs/guides/train-in-sim.md"
    for name in pictures.ROLLOUTS:
        assert (DOCS / "img/tasks" / name).is_file(), f"no docs/img/tasks/{name} ({FIX})"


def test_the_manifest_lists_what_each_group_made():
    manifest = json.loads((DOCS / "img/pictures.json").read_text())
    pictures = _pictures()
    assert set(manifest["groups"]) == set(pictures.GROUPS)
    for group, entry in manifest["groups"].items():
        assert entry["files"] and all((DOCS / "img" / f).is_file() for f in entry["files"]), (group, FIX)


def test_the_operator_view_picture_says_what_made_it_and_is_on_the_guide():
    entry = json.loads((DOCS / "img/pictures.json").read_text())["groups"]["operator-view"]
    # rerun's viewer (headless) where it runs, else the matplotlib drawing of the same recording
    assert entry["made_by"].startswith(("rerun viewer ", "matplotlib ")), (entry, FIX)
    shown = {(DOCS / "guides" / t).resolve() for t in shown_pictures(DOCS / "guides/demos-and-teleop.md")}
    assert (DOCS / "img/operator-view.png").resolve() in shown


@pytest.mark.parametrize("name", ["arm", "car"])
def test_the_ros2_graph_svg_is_drawn_from_the_graph_read_from_its_launch_file(name):
    pictures = _pictures()
    launch_file, env_id, _ = pictures.GRAPHS[name]
    graph = json.loads((DOCS / f"img/ros2-graph-{name}.json").read_text())
    assert (graph["launch"], graph["env"]) == (launch_file, env_id)
    assert (DOCS / f"img/ros2-graph-{name}.svg").read_text() == pictures.render_svg(graph), FIX
    # every node of the launch file (and the robot env's, when there is one) was up and has topics
    entries = [body for entry in yaml.safe_load((ROOT / launch_file).read_text())["launch"]
               for kind, body in entry.items() if kind == "node"]
    launched = {body.get("name") or body["exec"] for body in entries}
    nodes = {n["name"].rsplit("/", 1)[-1]: n for n in graph["nodes"]}
    assert {k for k, n in nodes.items() if n["origin"] == launch_file} == launched, FIX
    assert len(nodes) == len(launched) + bool(env_id)
    assert all(n["publishes"] or n["subscribes"] for n in nodes.values())
    # the drawing has a lane per node and a row per topic
    svg = (DOCS / f"img/ros2-graph-{name}.svg").read_text()
    topics = {t for n in graph["nodes"] for key in ("publishes", "subscribes") for t in n[key]}
    assert svg.count('class="topic"') == len(topics) and svg.count("<circle") >= len(topics)


def test_the_learning_curves_are_drawn_from_the_current_result_files_and_shown():
    pictures = _pictures()
    manifest = json.loads((DOCS / "img/pictures.json").read_text())
    assert manifest["groups"]["curves"]["inputs"] == pictures.inputs_hash("curves"), \
        "run: python scripts/doc_pictures.py --only curves (bash scripts/gen_docs.sh runs it)"
    shown = {(page.parent / t).resolve() for page in DOCS.rglob("*.md") for t in shown_pictures(page)}
    for picture, (_, names, _) in pictures.CURVES.items():
        assert (DOCS / "img/curves" / picture).resolve() in shown, f"docs/img/curves/{picture} is on no page"
        assert all(f"benchmarks/results/{name}.json" in pictures.GROUP_INPUTS["curves"] for name in names)


def test_a_finetuning_curve_joins_the_seeds_of_its_result_files():
    pictures = _pictures()
    _, names, _ = pictures.CURVES["finetune-pickcolor.png"]
    records = [json.loads((ROOT / f"benchmarks/results/{name}.json").read_text()) for name in names]
    task, method, curves, base = pictures.finetune_curves(records)
    bases = [b for r in records for b in r["figures"]["methods"][0]["bases"]]
    assert (task, method, sorted(curves)) == ("PickColor", "ibrl", [0, 1, 2, 3, 4, 5])
    assert base == pytest.approx(sum(bases) / len(bases))
    assert curves[3] == [tuple(point) for point in records[1]["figures"]["methods"][0]["curves"][0]]
    with pytest.raises(ValueError, match="one task and one method"):
        pictures.finetune_curves(records + [json.loads((ROOT / "benchmarks/results/finetune_pickcube.json")
                                                       .read_text())])


def test_the_docs_generator_runs_the_picture_script():
    assert "scripts/doc_pictures.py" in (ROOT / "scripts/gen_docs.sh").read_text()
