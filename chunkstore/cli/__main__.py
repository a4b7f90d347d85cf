"""`python -m chunkstore.cli ...` runs the command line, as `python -m chunkstore` does."""

import sys

from chunkstore.cli import main

if __name__ == "__main__":
    sys.exit(main())
