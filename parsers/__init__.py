"""Trace readers: any supported file -> Timeline. No Streamlit, Plotly or torch here."""

from stepscope.parsers.errors import TraceError
from stepscope.parsers.limits import ReadLimits
from stepscope.parsers.load import load_trace, parse_trace_bytes
from stepscope.parsers.timeline import Timeline, TraceMeta

__all__ = ["ReadLimits", "Timeline", "TraceError", "TraceMeta", "load_trace", "parse_trace_bytes"]
