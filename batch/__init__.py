"""Many traces -> Parquet tables (traces, steps, gaps), locally in a process pool or as Ray tasks.

Ray is imported only by batch/ray_runner.py, and only when asked for (``--ray``).
"""

if "." not in __name__:  # imported by its bare folder name in a checkout: be the stepscope. module
    from stepscope._checkout import alias_this

    alias_this(__name__)
