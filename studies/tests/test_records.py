"""The committed records pass their check, records/README.md is current, bad rows are caught."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from studies import records

REPO = Path(__file__).resolve().parents[2]


def test_every_committed_row_passes_the_check():
    kinds = records.load()
    assert kinds and all(kinds.values())


def test_the_records_readme_is_current():
    assert (records.RECORDS / "README.md").read_text() == records.render(records.load())
    assert records.main(["--check"]) == 0


def test_every_readme_link_to_a_record_names_a_row():
    ids = {row["id"] for rows in records.load().values() for row in rows}
    text = (REPO / "README.md").read_text()
    targets = re.findall(r"records/README\.md#([A-Za-z0-9_.-]+)", text)
    assert [t for t in targets if t not in ids] == []


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of records/ to break."""
    folder = tmp_path / "records"
    shutil.copytree(records.RECORDS, folder)
    return folder


def _edit(folder: Path, kind: str, number: int, change) -> None:
    """Apply `change` to row `number` (1-based) of folder/kind.jsonl."""
    path = folder / f"{kind}.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[number - 1])
    change(row)
    lines[number - 1] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")


def _fails(folder: Path, capsys) -> str:
    """The one stderr line of a check that exits 2."""
    assert records.main(["--check", "--folder", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


def test_a_row_without_its_commit_names_file_line_and_key(copy, capsys):
    _edit(copy, "interleaved", 2, lambda row: row.pop("commit"))
    assert _fails(copy, capsys).startswith("records/interleaved.jsonl:2: commit: missing")


def test_a_null_commit_needs_a_note(copy, capsys):
    _edit(copy, "accuracy", 1, lambda row: (row.update(commit=None), row.pop("commit_note")))
    assert _fails(copy, capsys).startswith("records/accuracy.jsonl:1: commit_note: missing")


def test_a_machine_needs_its_flags(copy, capsys):
    _edit(copy, "bench", 1, lambda row: row["machine"].pop("flags"))
    assert _fails(copy, capsys).startswith("records/bench.jsonl:1: machine.flags: missing")


def test_ids_are_unique_across_kinds(copy, capsys):
    first = json.loads((copy / "accuracy.jsonl").read_text().splitlines()[0])["id"]
    _edit(copy, "verify", 1, lambda row: row.update(id=first))
    assert "id: " in _fails(copy, capsys)


def test_a_bench_row_off_the_hand_counted_macs_is_a_bad_row(copy, capsys):
    def miscount(row: dict) -> None:
        ok = next(r for r in row["rows"] if r.get("gmacs") is not None)
        ok["macs_per_image"] += 1

    _edit(copy, "bench", 1, miscount)
    assert "macs_per_image" in _fails(copy, capsys)


def test_a_note_linking_to_no_row_is_a_bad_row(copy, capsys):
    (copy / "notes" / "extra.md").write_text("# Extra\n\nSee [it](../README.md#no-such-row).\n")
    assert _fails(copy, capsys) == "records/notes/extra.md:3: link: no row 'no-such-row'"


def test_a_stale_readme_exits_1(copy):
    (copy / "README.md").write_text("old\n")
    assert records.main(["--check", "--folder", str(copy)]) == 1
    assert records.main(["--folder", str(copy)]) == 0
    assert records.main(["--check", "--folder", str(copy)]) == 0


def test_the_hand_counted_macs_are_the_models_counts():
    """records.MACS, which bench rows are held to, equals toolkit's count of each preset."""
    pytest.importorskip("keras")
    from toolkit.keras_setup import setup_keras

    setup_keras()  # registers the custom layers for safe_mode loading
    from toolkit.models import build_model, count_macs, get_preset

    for (model, name), macs in records.MACS.items():
        assert count_macs(build_model(get_preset(model, name), (32, 32, 3), 10)) == macs
    # the cpu60 ShiftViT before issue 42's re-tune, which its older bench row measured
    from toolkit.models.architectures import ShiftViTArch

    earlier = replace(get_preset("shiftvit", "cpu60"), arch=ShiftViTArch(32, 4, 48, (2, 2, 4, 2)))
    assert (count_macs(build_model(earlier, (32, 32, 3), 10)),) == records.EARLIER_MACS[
        "shiftvit", "cpu60"
    ]


def test_the_presets_tables_gpu_minutes_are_the_gpu_records():
    """docs/presets.md's GPU column copies the whole-recipe minutes of the GPU training rows."""
    from toolkit.models.table import GPU_RECIPE_MINUTES

    rows = {(r["model"], r["preset"]): r for r in records.load()["gpu_train"]}
    assert set(GPU_RECIPE_MINUTES) <= set(rows)
    for key, (gpu, minutes) in GPU_RECIPE_MINUTES.items():
        assert minutes == rows[key]["recipe_minutes"]
        assert gpu == rows[key]["gpu"].removeprefix("NVIDIA ")
        assert rows[key]["minutes_to_target"] is None  # else the cell would read its minutes
