"""`python -m app.cli ...`: the package's entry point (the `stepscope` command runs the same main)."""

import sys

from stepscope.app.cli.main import main

sys.exit(main())
