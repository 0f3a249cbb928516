"""mkdocs hook: the Sphinx roles crdscale's docstrings use (``:class:`X```) shown as plain code.

mkdocstrings renders a docstring's ``:func:`name``` as ``:func:<code>name</code>``; the role is for
Sphinx, not for readers, so it is dropped here, after mkdocstrings has rendered the page.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc):(?=<code>)")


def on_page_content(html: str, **kwargs) -> str:
    return _ROLE.sub("", html)
