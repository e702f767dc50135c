"""On-disk cache of parsed Timelines (Arrow IPC) and analysis results (JSON), keyed by content.

This package's __init__ imports nothing on purpose: the warm command-line path (trace_cache.results)
must serve a cached result without loading numpy, pandas or pyarrow.
"""
