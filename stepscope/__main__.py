"""`python -m stepscope ...`: the same as the `stepscope` command.

The command line is reached by name: in a checkout it lives in app/, outside this folder, where no import
statement written here could point (stepscope/__init__.py)."""

import importlib

importlib.import_module("stepscope.app.cli.main").run()
