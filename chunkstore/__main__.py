"""`python -m chunkstore ...` runs the command line (chunkstore.cli)."""

import sys

from chunkstore.cli import main

if __name__ == "__main__":
    sys.exit(main())
