"""plotly.js inside the HTML report, packed: the basic bundle (bar, pie, scatter: every trace type the report draws),
gzipped and base64-encoded in the page, unpacked by the browser's own DecompressionStream.

Why: the full plotly.js plotly.py inlines is 4.8 MB and took most of a report's size (5-6 MB for any trace) and of
its opening time (the browser compiles it before the figures draw). plotly's published basic bundle
(npm plotly.js-basic-dist-min, MIT, vendored in exporters/vendor/ at the version plotly.py bundles) is 1.19 MB;
gzipped and base64-encoded 0.53 MB. A report whose figures use another trace type, or a plotly.py that bundles
another plotly.js version, gets the full bundle packed the same way (2 MB), never a figure that cannot draw.
"""

from __future__ import annotations

import base64
import gzip
import re
from functools import lru_cache
from pathlib import Path

import plotly.offline

VENDOR = Path(__file__).resolve().parent / "vendor"
BASIC_VERSION = "4.1.1"
BASIC_FILE = VENDOR / f"plotly-basic-{BASIC_VERSION}.min.js"
BASIC_TRACE_TYPES = frozenset({"bar", "pie", "scatter"})  # the bundle's trace modules (its README)
DATA_ID = "stepscope-plotly"
_TYPES_COMMENT = re.compile(r"<!-- plotly trace types: ([a-z0-9 ]*) -->")


def basic_usable() -> bool:
    """Whether the vendored basic bundle is the plotly.js version plotly.py writes figures for."""
    return plotly.offline.get_plotlyjs_version() == BASIC_VERSION and BASIC_FILE.is_file()


def types_comment(types: set[str]) -> str:
    """What a figure's div starts with: the trace types it draws (trace_types reads them back)."""
    return f"<!-- plotly trace types: {' '.join(sorted(t for t in types if t.isalnum()))} -->"


def trace_types(document: str) -> set[str]:
    """The trace types the document's figures draw (each figure's types_comment)."""
    return {t for found in _TYPES_COMMENT.findall(document) for t in found.split()}


@lru_cache(maxsize=2)
def packed(basic: bool) -> str:
    """base64 of gzip of plotly.js (the basic bundle, or the full one), made once per process (0.2 s)."""
    code = BASIC_FILE.read_bytes() if basic else plotly.offline.get_plotlyjs().encode()
    return base64.b64encode(gzip.compress(code, compresslevel=9, mtime=0)).decode("ascii")


def bundle_scripts(figure_scripts: str, drain: str) -> str:
    """The packed plotly.js and the script that unpacks it, runs it and then `drain` (the queued figures). The basic
    bundle when every trace type in `figure_scripts` is in it, else the full one."""
    basic = basic_usable() and trace_types(figure_scripts) <= BASIC_TRACE_TYPES
    unpack = (
        "(function(){var el=document.getElementById('" + DATA_ID + "');"
        "function fail(m){document.querySelectorAll('.plotly-graph-div').forEach(function(d){d.textContent=m;});}"
        "if(typeof DecompressionStream==='undefined'){fail('The figures need a browser that unpacks gzip "
        "(DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or later).');return;}"
        "var s=atob(el.textContent),b=new Uint8Array(s.length);for(var i=0;i<s.length;i++)b[i]=s.charCodeAt(i);"
        "new Response(new Blob([b]).stream().pipeThrough(new DecompressionStream('gzip'))).text()"
        ".then(function(code){(0,eval)(code);" + drain + "})"
        ".catch(function(e){fail('The figures could not be drawn: '+e);});})();"
    )
    return (
        f"<script id='{DATA_ID}' type='application/gzip;base64'>{packed(basic)}</script>"
        f"<script type='text/javascript'>{unpack}</script>"
    )
