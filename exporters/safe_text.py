"""Escaping for any string that came from a trace, before it reaches a browser or a terminal (standard library
only: the command line's cached answer prints through it without importing pandas).

Plotly renders a subset of HTML in hover labels and text, and Streamlit renders
Markdown (with some HTML handling) in st.markdown, st.error, labels and captions.
Trace files are untrusted: a kernel may be named `<img src=x onerror=alert(1)>`.

Two more kinds of character are never printed as they are, whatever the output (`plain`):
- bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates): a device or kernel
  name ending in U+202E (right-to-left override) would draw the words after it backwards ("confidence 0.50" as
  "05.0 ecnedifnoc"), in a page, a report or a terminal. They are written as the text `\\u202e`;
- lone surrogates (how Python holds the bytes of a file name that are not UTF-8): they cannot be encoded to be
  sent, and raised UnicodeEncodeError in the page. They are written as `\\xNN`, the byte they stand for.
"""

from __future__ import annotations

import html
import re

BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_NOT_A_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # surrogateescape stands for bytes as U+DC80-U+DCFF
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def plain(text: object) -> str:
    """The text with bidirectional controls as `\\u202e` and lone surrogates as `\\xNN` (see the module)."""
    text = str(text)
    if BIDI_CONTROLS.search(text):
        text = BIDI_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if _SURROGATES.search(text):
        text = _NOT_A_BYTE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)  # a surrogate no byte stands for
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def for_plotly(text: object) -> str:
    """Text safe in Plotly hovertext/text: HTML entities for <, >, & and quotes."""
    return html.escape(plain(text), quote=True)


def for_markdown(text: object) -> str:
    """Text that Streamlit's Markdown shows literally: every Markdown/HTML special backslash-escaped."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", plain(text))


def for_html(text: object) -> str:
    """Text for an HTML page's body or attributes (the HTML report)."""
    return html.escape(plain(text), quote=True)
