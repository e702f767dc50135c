"""Formats shared by a writer and its readers, torch-free and importing nothing else of Stepscope's.

    markers      the per-forward record_function names the collectors write and analysis parses
    run_record   run.json beside a trace: the typed RunRecord, its one reader and one writer
    sweep_record sweep.json of a prefill sweep: its schema, reader and writer

Collectors write through these modules; parsers, analysis and the app read through them.
"""
