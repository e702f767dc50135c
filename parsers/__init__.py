"""Trace readers: any supported file -> Timeline. No Streamlit, Plotly or torch here."""

if "." not in __name__:  # imported by its bare folder name in a checkout: be the stepscope. module
    from stepscope._checkout import alias_this

    alias_this(__name__)

from .errors import TraceError
from .limits import ReadLimits
from .load import load_trace, parse_trace_bytes
from .timeline import Timeline, TraceMeta

__all__ = ["ReadLimits", "Timeline", "TraceError", "TraceMeta", "load_trace", "parse_trace_bytes"]
