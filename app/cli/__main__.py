"""`python -m app.cli ...`: the package's entry point (the `stepscope` command runs the same main)."""

import sys

from app.cli.main import main

sys.exit(main())
