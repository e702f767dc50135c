"""`python -m app.cli ...`: the package's entry point (app.cli itself is imported once, as a package)."""

import sys

from app.cli import main

sys.exit(main())
