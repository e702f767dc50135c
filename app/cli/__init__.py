"""Command line: `stepscope analyze|compare|report|export|roofline|run|sweep|batch|app ...`
(or `python -m app.cli ...`).

The entry point is app.cli.main (`main()` for tests and scripts, `run()` for the command). Nothing is
re-exported here: a package attribute named like one of its submodules (this package's `main`) would be
replaced by the submodule as soon as it is imported under its bare name (tests/test_module_names.py).
"""
