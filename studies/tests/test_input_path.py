"""studies.input_path on a tiny preset: the three input paths timed, the report a valid records
row (records/input_path.jsonl), its table naming each path against the host's."""

from __future__ import annotations

import json

import pytest

from studies import input_path, records

pytestmark = pytest.mark.slow  # builds, compiles and times three training steps


def test_the_three_paths_are_timed_into_a_records_row(tmp_path, capsys):
    out = tmp_path / "row.json"
    argv = ["--model", "shiftvit", "--preset", "tiny", "--data", "shapes:200", "--batches", "16"]
    argv += ["--steps", "2", "--warmup", "1", "--rounds", "2", "--json", str(out), "--id", "t-1"]
    assert input_path.main(argv) == 0
    report = json.loads(out.read_text())
    records.check_row(report, "input_path")
    assert [(r["path"], r["batch"]) for r in report["rows"]] == [
        ("host", 16),
        ("device", 16),
        ("step", 16),
    ]
    for row in report["rows"]:
        assert len(row["rounds_images_per_s"]) == 2 and row["images_per_s"] > 0
    table = capsys.readouterr().out
    assert "| 16 | host |" in table and "1.00x" in table and "| 16 | step |" in table
    summary = records.SUMMARY["input_path"](report)
    assert summary.startswith(f"{report['backend']} float32, img/s: batch 16: host ")


def test_an_unknown_path_is_refused():
    with pytest.raises(SystemExit) as exit_info:
        input_path.parse_args(["--model", "shiftvit", "--paths", "host,disk"])
    assert exit_info.value.code == 2


def test_an_unwritable_json_is_refused_before_any_training(tmp_path, capsys):
    folder = tmp_path / "report.json"
    folder.mkdir()  # a folder where the report would go
    with pytest.raises(SystemExit) as exit_info:
        input_path.parse_args(["--model", "shiftvit", "--json", str(folder)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--json" in error and str(folder) in error
