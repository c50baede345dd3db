"""mkdocs hooks of the docs site (``mkdocs.yml: hooks``).

The library's docstrings are numpydoc with Sphinx cross-reference roles (``:func:`name```);
mkdocstrings renders the role's name as text before the code. The hook drops the role and,
as Sphinx does for ``~``, keeps only the last dotted part of a ``~``-prefixed target.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:func|class|meth|data|attr|mod|exc|obj|const):<code>(~?)([^<]*)</code>")


def plain_roles(html: str) -> str:
    """``html`` with every Sphinx role shown as its target in code."""
    return ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>",
                    html)


def on_page_content(html: str, **_: Any) -> str:
    return plain_roles(html)
