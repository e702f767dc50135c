"""Escaping for any string that came from a trace, before it reaches a browser.

Plotly renders a subset of HTML in hover labels and text, and Streamlit renders
Markdown (with some HTML handling) in st.markdown, st.error, labels and captions.
Trace files are untrusted: a kernel may be named `<img src=x onerror=alert(1)>`.
"""

from __future__ import annotations

import html
import re

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def for_plotly(text: object) -> str:
    """Text safe in Plotly hovertext/text: HTML entities for <, >, & and quotes."""
    return html.escape(str(text), quote=True)


def for_markdown(text: object) -> str:
    """Text that Streamlit's Markdown shows literally: every Markdown/HTML special backslash-escaped."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", str(text))
