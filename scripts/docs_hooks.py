"""mkdocs hook: docstrings written for Sphinx render cleanly. mkdocstrings turns ``:class:`Agent``` into
``:class:<code>Agent</code>`` (and help text in code blocks keeps it as written); the role prefix goes, the code
stays. (Configured under ``hooks:`` in mkdocs.yml.)"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|ref|const|any):(?=<code>|`)")
DOUBLE_BACKTICKS = re.compile(r"``([^`]+?)``")


def on_page_content(html: str, **_: object) -> str:
    html = ROLE.sub("", html)
    return DOUBLE_BACKTICKS.sub(r"\1", html)  # RST literals left in text blocks: the text, without the marks
