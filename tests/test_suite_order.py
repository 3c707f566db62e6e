"""The suite's own order (tests/suite_order.py): the modules it starts first exist, once each."""

from pathlib import Path

from suite_order import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_modules_listed_first_exist_once_each():
    assert [m for m in LONGEST_FIRST if not (ROOT / m).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
