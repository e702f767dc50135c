"""Many traces -> Parquet tables (traces, steps, gaps), locally in a process pool or as Ray tasks.

Ray is imported only by batch/ray_runner.py, and only when asked for (``--ray``).
"""
