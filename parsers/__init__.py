"""Trace readers: any supported file -> Timeline. No Streamlit, Plotly or torch here."""

from .errors import TraceError
from .limits import ReadLimits
from .load import load_trace, parse_trace_bytes
from .timeline import Timeline, TraceMeta

__all__ = ["ReadLimits", "Timeline", "TraceError", "TraceMeta", "load_trace", "parse_trace_bytes"]
