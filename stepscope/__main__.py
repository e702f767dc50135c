"""`python -m stepscope ...`: the same as the `stepscope` command."""

import sys

from stepscope.app.cli.main import main

sys.exit(main())
