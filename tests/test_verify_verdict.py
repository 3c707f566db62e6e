"""verify's verdict: failing cells fail it, and a report whose every cell checked nothing
(every runtime asked for was unavailable) does not pass."""

from __future__ import annotations

from toolkit.verify.cells import FAIL, NOT_APPLICABLE, PASS, UNAVAILABLE
from toolkit.verify.verifier import conclude


def _report(*statuses: str, failures: tuple[str, ...] = ()) -> dict:
    cells = [{"status": s} for s in statuses]
    return {"models": {"cells": cells, "summary": {"failures": list(failures)}}}


def test_a_report_that_checked_nothing_does_not_pass():
    report = conclude(_report(UNAVAILABLE, UNAVAILABLE, NOT_APPLICABLE))
    assert not report["passed"]
    assert report["failures"] == [
        "nothing was checked: each of the 3 cells is unavailable or not applicable (the lines "
        "above say why): install a runtime that runs here, or pick one with --runtime"
    ]


def test_one_passing_cell_among_unavailable_ones_passes():
    assert conclude(_report(UNAVAILABLE, PASS))["passed"]


def test_a_failing_cell_fails():
    report = conclude(_report(PASS, FAIL, failures=("onnx ort-cpu fp32",)))
    assert not report["passed"] and report["failures"] == ["onnx ort-cpu fp32"]
