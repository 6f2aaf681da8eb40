"""Every page of the docs site as a reader sees it: built with mkdocs, served locally and rendered in headless
Chromium at 1280x800. No element reaches past the content area unless it scrolls inside a box of its own that fits
(wide tables and code scroll), no text is cut off by a clipping box, no markup is left raw in the prose, and no page
asks for anything outside the site. Chromium is Debian's package (scripts/setup.sh), driven by playwright."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = (Path(__file__).parent / "page_check.js").read_text()
VIEWPORT = {"width": 1280, "height": 800}

pytestmark = pytest.mark.timeout(600)


def _chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("no Chromium: scripts/setup.sh installs Debian's chromium package (or set CHROMIUM=path)")
    return path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The built site and the local address serving it."""
    out = tmp_path_factory.mktemp("render") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield out, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _render(browser: object, origin: str, paths: list[str]) -> tuple[dict[str, dict], list[str]]:
    """The page check of each path, and every request that left the site."""
    page = browser.new_page(viewport=VIEWPORT)
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith((origin, "data:", "blob:")) else outside.append(r.url))
    found = {}
    try:
        for path in paths:
            page.goto(f"{origin}/{path}", wait_until="load")
            found[path] = page.evaluate(CHECK)
    finally:
        page.close()
    return found, outside


def test_every_page_fits_a_1280_screen_shows_no_raw_markup_and_stays_on_the_site(site, browser) -> None:
    root, origin = site
    paths = sorted(p.parent.relative_to(root).as_posix().removeprefix(".") + "/" for p in root.rglob("index.html"))
    assert len(paths) > 50, paths
    found, outside = _render(browser, origin, [p.lstrip("/") for p in paths])
    faults = {p: {k: v for k, v in r.items() if v} for p, r in found.items() if any(r.values())}
    assert not faults, faults
    assert not outside, sorted(set(outside))[:10]


def test_the_page_check_finds_what_it_looks_for(site, browser) -> None:
    """A page made wrong on purpose: an element wider than the column, text cut off by a clipping box, raw RST and
    Markdown in the prose (a literal, a link, a table row) and a request to another site are each reported."""
    root, origin = site
    html = (root / "getting-started/index.html").read_text()
    broken = ('<div style="width: 3000px">a wide box</div>'
              '<div style="overflow: hidden; width: 200px; white-space: nowrap">' + "cut off " * 60 + "</div>"
              "<p>see ``robot-rl train`` and [the guide](guides/robot.md)</p><p>| field | value |</p>"
              '<img src="https://example.org/tracker.png">')
    (root / "broken").mkdir(exist_ok=True)
    (root / "broken/index.html").write_text(html.replace('<article class="md-content__inner md-typeset">',
                                                         '<article class="md-content__inner md-typeset">' + broken, 1))
    found, outside = _render(browser, origin, ["broken/"])
    result = found["broken/"]
    assert any("a wide box" in w for w in result["wide"]), result
    assert any("cut off" in c for c in result["clipped"]), result
    assert {"``robot-rl train``", "[the guide](guides/robot.md)", "| field | value |"} <= set(result["raw"]), result
    assert set(outside) == {"https://example.org/tracker.png"}, outside
