"""`python -m app.cli ...`: the package's entry point (the `stepscope` command runs the same function)."""

from stepscope.app.cli.main import run

run()
