"""`python -m cli ...` is the `toolkit` console script."""

import sys

from cli.main import main

sys.exit(main())
