"""`python -m numr_web ...`: the `numr-web` command line (numr_web.apps.cli)."""
import sys

from .apps.cli import main

sys.exit(main())
