"""`python -m app.cli ...`: the package's entry point (the `stepscope` command runs the same function)."""

from .main import run

run()
