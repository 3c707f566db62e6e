"""The bundle's file names, one home: the writers, the bundle README, owned.py (what ship
wrote) and `--serve` name them from here."""

from __future__ import annotations

CARD_FILE = "MODEL_CARD.md"  # card.py writes it
README_FILE = "README.md"  # readme.py writes it
REPORT_FILE = "report.html"  # report_html.py writes it
WEB_DIR = "web"  # webapp.py writes it (the web target only)
