"""Trace readers: any supported file -> Timeline. No Streamlit, Plotly or torch here."""

from parsers.errors import TraceError
from parsers.limits import ReadLimits
from parsers.load import load_trace, parse_trace_bytes
from parsers.timeline import Timeline, TraceMeta

__all__ = ["ReadLimits", "Timeline", "TraceError", "TraceMeta", "load_trace", "parse_trace_bytes"]
