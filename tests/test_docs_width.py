"""The docs fit the column the theme shows: every line of a fenced block in docs/ (hand-written pages, design
records, and the generated reference and benchmark pages) is at most ``CODE_COLUMNS`` characters, so nothing is cut
at the right edge, no diagram uses a glyph wider than a cell, and a table's first column (the field names of the
configuration reference) never breaks a name in two. Too long a line: rewrap a command with ``\\`` continuations,
put a comment on its own line, or, for a generated page, fix its generator (robot_rl/reference_docs.py,
benchmarks/pages/*.md) and run ``bash scripts/gen_docs.sh``."""

from __future__ import annotations

import re
from pathlib import Path

from robot_rl.reference_docs import CODE_COLUMNS, PAGES

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})")


def fenced_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line inside a fenced block, less the indentation of its fence (a block in a
    list item or an admonition is indented in the source, not on the page)."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.groups()
        elif match and match.group(2).startswith(fence[1][0]) and len(match.group(2)) >= len(fence[1]) \
                and not line.strip().strip(fence[1][0]):
            fence = None
        else:
            out.append((number, line.removeprefix(fence[0])))
    return out


def test_fenced_lines_are_found_inside_fences_only():
    text = "a\n```bash\none\n  two\n```\n- item\n\n    ~~~text\n    three\n    ~~~\n````md\n```\nfour\n````\n"
    assert fenced_lines(text) == [(3, "one"), (4, "  two"), (9, "three"), (12, "```"), (13, "four")]


def test_every_code_line_in_the_docs_fits_the_column():
    pages = sorted((ROOT / "docs").rglob("*.md"))
    assert len(pages) > 50 and all((ROOT / page).is_file() for page in PAGES.values())
    too_long = [f"{page.relative_to(ROOT)}:{number}: {len(line)} characters"
                for page in pages for number, line in fenced_lines(page.read_text()) if len(line) > CODE_COLUMNS]
    assert not too_long, f"{len(too_long)} code lines wider than {CODE_COLUMNS} characters: {too_long[:30]}"


WIDE_GLYPHS = re.compile("[\u25a0-\u25ff\u2b00-\u2bff\U0001f300-\U0001faff]")
"""Geometric shapes (▶ ◀ ▲ ■ ...), the arrows and symbols block and emoji: most monospace fonts lack them or draw
them wider than a cell, so a diagram drawn with them loses its alignment on the page (box-drawing lines and → are
in every common monospace font; arrowheads are drawn as > < ^ v)."""


def test_no_code_block_uses_a_glyph_wider_than_a_cell():
    found = [f"{page.relative_to(ROOT)}:{number}: {WIDE_GLYPHS.findall(line)}"
             for page in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
             for number, line in fenced_lines(page.read_text()) if WIDE_GLYPHS.search(line)]
    assert not found, found


def test_a_field_name_in_a_table_is_never_broken_in_two():
    # the theme lets inline code break anywhere (word-break: break-word), and a table shrinks a column to its
    # narrowest content, so a narrow first column split 'actor_resourc|e'; extra.css keeps that code on one line
    css = re.sub(r"/\*.*?\*/", "", (ROOT / "docs/stylesheets/extra.css").read_text(), flags=re.S)
    rules = dict(re.findall(r"([^{}]+)\{([^{}]*)\}", css))
    nowrap = [sel for sel, body in rules.items() if re.search(r"white-space\s*:\s*nowrap", body)]
    assert any(re.search(r"\btable\b.*\btd:first-child\s+code\b", sel) for sel in nowrap), rules
    # and the configuration reference puts every field name in that first column as code
    rows = [line for line in (ROOT / PAGES["config"]).read_text().splitlines() if line.startswith("| `")]
    assert len(rows) > 200 and all(re.match(r"\| `[A-Za-z_][\w.]*` \|", row) for row in rows)
