"""`python -m stepscope ...`: the same as the `stepscope` command."""

from stepscope.app.cli.main import run

run()
