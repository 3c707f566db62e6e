"""Progress of long work: one flushed line per step on stderr, stdout left to the results."""

from __future__ import annotations

from toolkit.common.progress import progress
from toolkit.verify import verify_ops

SHIFT = {"h": 5, "w": 7, "c": 26, "num_div": 12, "shift_pixel": 1}


def test_progress_is_one_line_on_stderr(capsys):
    progress("bench row", 3, 12, "tflite on litert, batch 1")
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "   bench row 3 of 12: tflite on litert, batch 1\n"


def test_verify_ops_reports_cells_done_of_total_once_per_shape(capsys):
    shapes = {"shift": [SHIFT, {**SHIFT, "h": 3}]}
    report = verify_ops(shapes, ops=["shift"], runtimes=["keras", "ort-cpu"])
    lines = [x for x in capsys.readouterr().err.splitlines() if "verify op cells" in x]
    total = len(report["cells"])
    assert total == 2 * 2 * 2  # shapes x runtimes x precisions
    assert [x.split(":")[0].strip() for x in lines] == [
        f"verify op cells {total // 2} of {total}",
        f"verify op cells {total} of {total}",
    ]
