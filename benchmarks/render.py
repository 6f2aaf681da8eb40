"""Renders the docs' benchmark pages from the result files: ``python benchmarks/render.py``.

Each page is a template under ``benchmarks/pages/`` (the prose: what is measured and why it matters) in which
``{{ result NAME }}`` stands for every table of ``benchmarks/results/NAME.json`` and ``{{ result NAME:I }}`` for its
table I, each followed by where the figures come from (command, machine, commit, date).
``{{ compare NAME[:I][="LABEL"] ... }}`` sets table I (default 0) of several result files side by side as one table:
a row per row of each, named by LABEL (or the row's first cell), the columns matched by name (``-`` where a file
lacks one, or the figures' ``seeds`` counted), an ``env steps`` column where a file's figures give ``env_steps``,
and each row's source numbered below it. The output goes to
``docs/benchmarks/`` (``limits.md`` to ``docs/``); the templates under ``benchmarks/pages/design/`` are design records
whose evidence is result files, rendered to ``docs/design/``. ``--check`` renders without writing and exits 1 if a
page is out of date (the tests run it)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TEMPLATES = HERE / "pages"
DESIGN_TEMPLATES = TEMPLATES / "design"
RESULTS = HERE / "results"
MARKER = re.compile(r"\{\{\s*result\s+([\w.-]+)(?::(\d+))?\s*\}\}")
COMPARE = re.compile(r"\{\{\s*compare\s+(.+?)\s*\}\}", re.S)
MACHINES = re.compile(r"\{\{\s*machines\s*\}\}")
COMPARE_ITEM = re.compile(r"([\w.-]+)(?::(\d+))?(?:=(.+))?", re.S)
REQUIRED = ("benchmark", "command", "commit", "date", "machine", "figures")


def output_path(template: Path) -> Path:
    if template.parent == DESIGN_TEMPLATES:
        return ROOT / "docs/design" / template.name
    return ROOT / "docs" / (template.name if template.stem == "limits" else f"benchmarks/{template.name}")


def load_result(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"render: no result file {path.relative_to(ROOT)}")
    record = json.loads(path.read_text())
    missing = [k for k in REQUIRED if k not in record] + [k for k in ("cpu", "cores") if k not in record["machine"]]
    if missing or not record["figures"].get("tables"):
        raise SystemExit(f"render: {path.relative_to(ROOT)} lacks {missing or ['figures.tables']}")
    return record


def machine_text(m: dict[str, Any]) -> str:
    parts = [f"{m['cpu']}, {m['cores']} cores"]
    parts += [m[k] for k in ("note",) if m.get(k)]
    parts += [f"{k} {m[k]}" for k in ("torch", "mujoco") if m.get(k)]
    if m.get("gpu"):
        parts.append(f"GPU: {m['gpu']}")
    return ", ".join(parts)


def source_line(record: dict[str, Any]) -> str:
    date = record["date"][:10] if record["date"] else "date not recorded"
    where = f"commit `{record['commit']}`, {date}" if record["commit"] else date
    text = f"Command: `{record['command']}`. Machine: {machine_text(record['machine'])}. Measured at {where}."
    if record.get("carried_over"):
        text += f" {record['carried_over']}"
    return text


def source_text(record: dict[str, Any]) -> str:
    return f'<p class="bench-source"><small>{_html(source_line(record))}</small></p>'


def _html(text: str) -> str:
    """Inline code spans of ``text`` as <code>, the rest escaped (the line is raw HTML so Markdown keeps it one
    paragraph under the table)."""
    out = []
    for i, part in enumerate(text.split("`")):
        part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        out.append(f"<code>{part}</code>" if i % 2 else part)
    return "".join(out)


def table_markdown(table: dict[str, Any]) -> str:
    def cell(text: Any) -> str:
        return str(text).replace("|", r"\|").replace("\n", " ")

    lines = [f"**{table['title']}**\n"] if table.get("title") else []
    lines += ["| " + " | ".join(cell(c) for c in table["columns"]) + " |",
              "|" + "---|" * len(table["columns"])]
    for row in table["rows"]:
        if len(row) != len(table["columns"]):
            raise SystemExit(f"render: a row of {table['title']!r} has {len(row)} cells for {len(table['columns'])}")
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    if table.get("notes"):
        lines.append(f"\n{table['notes']}")
    return "\n".join(lines)


def compare_markdown(spec: str, used: set[str]) -> str:
    """The table of a ``{{ compare ... }}`` marker (see the module's docstring) and its numbered sources."""
    runs = []
    for item in shlex.split(spec):
        match = COMPARE_ITEM.fullmatch(item)
        if not match:
            raise SystemExit(f"render: cannot read {item!r} in a compare marker")
        name, index, label = match.group(1), int(match.group(2) or 0), match.group(3)
        used.add(name)
        record = load_result(name)
        runs.append((record, record["figures"]["tables"][index], label))
    steps = any("env_steps" in record["figures"] for record, _, _ in runs)
    columns: list[str] = []
    for _, table, _ in runs:
        columns += [c for c in table["columns"][1:] if c not in columns]
    header = ["run"] + (["env steps"] if steps else []) + columns + ["source"]
    rows, sources = [], []
    for number, (record, table, label) in enumerate(runs, 1):
        sources.append(f"[{number}] {source_line(record)}")
        for row in table["rows"]:
            cells = dict(zip(table["columns"], row))
            if "seeds" not in cells and isinstance(record["figures"].get("seeds"), list):
                cells["seeds"] = len(record["figures"]["seeds"])
            name = row[0] if not label else label if len(table["rows"]) == 1 else f"{label}: {row[0]}"
            rows.append([name] + ([record["figures"].get("env_steps", "-")] if steps else [])
                        + [cells.get(c, "-") for c in columns] + [f"[{number}]"])
    body = table_markdown({"columns": header, "rows": rows})
    return body + '\n\n<p class="bench-source"><small>' + "<br>\n".join(_html(s) for s in sources) + "</small></p>"


def machines_markdown() -> str:
    """Every machine the result files name, with how many results each recorded (the overview's list of machines
    cannot miss one or name one no result ran on)."""
    count: dict[tuple[str, ...], int] = {}
    for path in sorted(RESULTS.glob("*.json")):
        m = json.loads(path.read_text())["machine"]
        key = (str(m["cpu"]), str(m["cores"]), str(m.get("gpu") or "-"), ", ".join(m.get("cpu_bf16", [])) or "-")
        count[key] = count.get(key, 0) + 1
    lines = ["| CPU | cores | GPU | bfloat16 kernels (recorded) | results |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(k)} | {n} |" for k, n in sorted(count.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)


def render_template(text: str, used: set[str]) -> str:
    def replace(match: re.Match) -> str:
        name, index = match.group(1), match.group(2)
        used.add(name)
        record = load_result(name)
        tables = record["figures"]["tables"]
        chosen = tables if index is None else [tables[int(index)]]
        return "\n\n".join(table_markdown(t) for t in chosen) + "\n\n" + source_text(record)

    text = MACHINES.sub(lambda _: machines_markdown(), text)
    text = COMPARE.sub(lambda match: compare_markdown(match.group(1), used), text)
    return MARKER.sub(replace, text)


def render_all() -> tuple[dict[Path, str], set[str]]:
    pages, used = {}, set()
    for template in sorted(TEMPLATES.glob("*.md")) + sorted(DESIGN_TEMPLATES.glob("*.md")):
        source = template.relative_to(ROOT)
        note = (f"<!-- Generated by `python benchmarks/render.py` from {source} and benchmarks/results/*.json; "
                "do not edit. -->\n\n")
        page = render_template(template.read_text(), used)
        # after the page's heading: mkdocs titles a page by a heading that comes first, else by its file name
        heading, rest = page.split("\n", 1) if page.startswith("# ") else ("", page)
        pages[output_path(template)] = f"{heading}\n\n{note}{rest.lstrip(chr(10))}" if heading else note + page
    return pages, used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a rendered page differs from the one on disk")
    args = parser.parse_args(argv)
    pages, used = render_all()
    unused = sorted({p.stem for p in RESULTS.glob("*.json")} - used)
    if unused:
        print(f"render: result files no page shows: {unused}", file=sys.stderr)
    stale = [p for p, text in pages.items() if not p.is_file() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"out of date: {p.relative_to(ROOT)} (run: python benchmarks/render.py)", file=sys.stderr)
        return 1 if stale or unused else 0
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"{path.relative_to(ROOT)}: {'rewritten' if path in stale else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
