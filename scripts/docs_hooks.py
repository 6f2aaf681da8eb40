"""mkdocs hook: docstrings written for Sphinx render cleanly. mkdocstrings turns ``:class:`Agent``` into
``:class:<code>Agent</code>`` (and help text in code blocks keeps it as written); the role prefix goes, the code
stays. Search ranks the guides and the reference above the design records (a design record's words match many
queries; a newcomer searching "ros2_control" wants the guide). (Configured under ``hooks:`` in mkdocs.yml.)"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|ref|const|any):(?=<code>|`)")
DOUBLE_BACKTICKS = re.compile(r"``([^`]+?)``")


def on_page_content(html: str, **_: object) -> str:
    html = ROLE.sub("", html)
    return DOUBLE_BACKTICKS.sub(r"\1", html)  # RST literals left in text blocks: the text, without the marks


DESIGN_RECORD_BOOST = 0.3  # Material's search: a page's score is multiplied by its boost (default 1)


def on_page_markdown(markdown: str, page: object, **_: object) -> str:
    if page.file.src_uri.startswith("design/"):  # type: ignore[attr-defined]
        page.meta.setdefault("search", {}).setdefault("boost", DESIGN_RECORD_BOOST)  # type: ignore[attr-defined]
    return markdown
