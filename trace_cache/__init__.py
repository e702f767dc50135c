"""On-disk cache of parsed Timelines (Arrow IPC) and analysis results (JSON), keyed by content.

This package's __init__ imports nothing on purpose: the warm command-line path (trace_cache.results)
must serve a cached result without loading numpy, pandas or pyarrow.
"""

if "." not in __name__:  # imported by its bare folder name in a checkout: be the stepscope. module
    from stepscope._checkout import alias_this

    alias_this(__name__)
