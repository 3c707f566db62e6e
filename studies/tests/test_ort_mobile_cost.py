"""studies.ort_mobile_cost: the .ort's cost on the CPU provider, separated into its causes."""

from __future__ import annotations

import json

import pytest
from tiny_runs import copy_tiny_run

from studies import ort_mobile_cost


@pytest.mark.slow  # builds the variants from a tiny run's model and times them
def test_every_variant_is_timed_against_model_onnx(tiny_runs, tmp_path, capsys):
    run = copy_tiny_run(tiny_runs.exported("shiftvit"), tmp_path / "run")
    out = tmp_path / "cost.json"
    argv = [str(run), "--segments", "2", "--calls", "3", "--warmup", "1", "--json", str(out)]
    assert ort_mobile_cost.main(argv) == 0
    report = json.loads(out.read_text())
    rows = {r["format"]: r for r in report["rows"]}
    assert list(rows) == list(ort_mobile_cost.VARIANTS)
    assert all(r["status"] == "ok" and r["p50_ms"] > 0 for r in rows.values())
    assert rows["onnx"]["vs_fp32"] == pytest.approx(1.0)
    assert all(r["vs_fp32"] > 0 for r in rows.values())
    assert "| `onnx-mobile` |" in capsys.readouterr().out


def test_a_run_without_the_files_is_one_line(tmp_path, capsys):
    assert ort_mobile_cost.main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
