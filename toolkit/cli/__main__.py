"""`python -m toolkit.cli ...` is the `toolkit` console script."""

import sys

from toolkit.cli.main import main

sys.exit(main())
