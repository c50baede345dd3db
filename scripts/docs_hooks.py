"""mkdocs hooks of the docs site (``mkdocs.yml: hooks``).

* Pages moved from the README keep its repository-root links, so that a change to the old
  README text still applies to them as a patch: ``](docs/x.png)`` points into the site, and a
  link into ``benchmarks/`` (outside the site: saved results, reports) is shown as its path.
* The library's docstrings are numpydoc with Sphinx cross-reference roles (``:func:`name```);
  mkdocstrings renders the role's name as text before the code. The hook drops the role and,
  as Sphinx does for ``~``, keeps only the last dotted part of a ``~``-prefixed target.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:func|class|meth|data|attr|mod|exc|obj|const):<code>(~?)([^<]*)</code>")
#: A Markdown link (not an image) whose target is under benchmarks/.
BENCHMARK_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((benchmarks/[^)\s]+)\)")
#: A link or image whose target is under docs/, written from the repository's root.
DOCS_LINK = re.compile(r"\]\(docs/")


def plain_roles(html: str) -> str:
    """``html`` with every Sphinx role shown as its target in code."""
    return ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>",
                    html)


def root_links(markdown: str, depth: int) -> str:
    """Repository-root links of a page ``depth`` folders below ``docs/``, made site links:
    ``docs/...`` relative to the page, ``benchmarks/...`` as the path in code."""

    def benchmark(match: re.Match[str]) -> str:
        text, target = match[1], match[2]
        if text.strip("`") in (target, target.split("#")[0]) or target.endswith(
                text.strip("`")):
            return f"`{target}`"
        return f"{text} (`{target}`)"

    markdown = BENCHMARK_LINK.sub(benchmark, markdown)
    return DOCS_LINK.sub("](" + "../" * depth, markdown)


def on_page_markdown(markdown: str, *, page: Any, **_: Any) -> str:
    return root_links(markdown, page.file.src_uri.count("/"))


def on_page_content(html: str, **_: Any) -> str:
    return plain_roles(html)
