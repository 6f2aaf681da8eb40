"""Every figure in the README's results table is its benchmark page's own: each number in a row's figure appears
in the page that row links to (the pages are rendered from the result files, so the README cannot drift from them
unseen)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| \[(?P<what>[^\]]+)\]\((?P<page>[^)#]+)(?:#[^)]*)?\)[^|]*\| (?P<figure>.*) \|$")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def test_every_readme_figure_is_on_its_page() -> None:
    readme = (ROOT / "README.md").read_text()
    rows = [m for line in readme[readme.index("## Results"):].splitlines() if (m := ROW.match(line))]
    assert len(rows) >= 5, "the README's results table was not found"
    differing = []
    for row in rows:
        page = (ROOT / row["page"]).read_text()
        differing += [f"{row['what']}: {n} is not on {row['page']}" for n in NUMBER.findall(row["figure"])
                      if n not in page]
    assert not differing, differing
