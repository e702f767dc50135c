"""Real captures of generation shapes, made on this machine with tiny models (random weights, no download).

`python -m tests.captures.make` runs each shape in shapes.py under torch.profiler and writes, to
tests/data/captures/, the trace (`<shape>.json.gz`) and the truth recorded by the run itself
(`<shape>.truth.json`: every forward call with its model, input shape, thread and time on the trace's
clock; per-sequence batch contents where the engine exposes them; the request count from the inputs
given). Nothing in the truth is computed by Stepscope.
"""
