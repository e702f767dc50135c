"""One uploader, the same on Analyze and Compare: any file (the format is read from the content, so no browser
filter turns a .txt or .bin away with MIME jargon), one file in the box, and an error that names the file and the
formats Stepscope reads; the next file replaces both the file and its error (the message is made from the file
in the box on every run, never kept).

The note on trace_processor_shell appears only with an error about a Perfetto trace that needs it.
"""

from __future__ import annotations

from collections.abc import MutableMapping

import streamlit as st

from stepscope.exporters.safe_text import for_markdown
from stepscope.parsers.trace_processor import trace_processor_status
from .uploads import register_upload, register_upload_run, size_limit_text

FORMATS_READ = (
    "Stepscope reads Kineto/Chrome JSON (.json, .json.gz), Perfetto (.pftrace) and Nsight Systems SQLite "
    "exports (.sqlite), by their content."
)


def upload_error_text(error: str) -> str:
    """The message for a rejected upload (its file name comes first in `error`): the reason, the formats read,
    and the trace_processor note only where the reason is a Perfetto trace that needs it."""
    text = f"Could not read {error.rstrip('.')}. {FORMATS_READ}"
    if "trace_processor" in error:
        text += f" {trace_processor_status()}."
    return text


def upload_box(state: MutableMapping, key: str, label: str = "Upload a trace", where=None) -> str | None:
    """The uploader; the source key of a trace newly read from it (None when nothing new). Several files dropped
    together are one run (a serving engine's profile folder: its worker and its API server's trace, read as
    `analyze DIR` reads the folder)."""
    target = where if where is not None else st
    help_text = (
        size_limit_text()
        + " Drop every file of one capture together (a vLLM profile folder's files) to open them as one run."
    )
    uploaded = target.file_uploader(label, key=key, help=help_text, accept_multiple_files=True)
    if not uploaded:
        return None
    if len(uploaded) > 1:
        result = register_upload_run(state, [(f.name, f.getvalue()) for f in uploaded])
    else:
        result = register_upload(state, uploaded[0].name, uploaded[0].getvalue())
    if result.error:
        target.error(for_markdown(upload_error_text(result.error)), icon=":material/error:")
        return None
    last = f"{key}_last"
    if state.get(last) == result.key:
        return None
    state[last] = result.key
    return result.key
