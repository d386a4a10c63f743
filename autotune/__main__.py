"""Run the command line with ``python -m autotune``."""

import sys

from autotune.cli import main

if __name__ == "__main__":
    sys.exit(main())
