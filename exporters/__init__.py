"""Writers that take Stepscope's results to other tools (Perfetto UI). No Streamlit here."""

if "." not in __name__:  # imported by its bare folder name in a checkout: be the stepscope. module
    from stepscope._checkout import alias_this

    alias_this(__name__)

from .perfetto_trace import PerfettoExport, perfetto_trace_bytes, write_perfetto
from .perfetto_ui import open_in_perfetto_html

__all__ = ["PerfettoExport", "open_in_perfetto_html", "perfetto_trace_bytes", "write_perfetto"]
