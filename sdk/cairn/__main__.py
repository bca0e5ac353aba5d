"""`python -m cairn ...` is the same as the `cairn` command."""
import sys

from cairn.cli import main

sys.exit(main())
