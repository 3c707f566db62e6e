"""`toolkit demo`: an interrupted demo is continued where it stopped, not refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.cli import demo
from toolkit.cli.main import main
from toolkit.runfiles import BENCH_FILE, VERIFY_FILE
from toolkit.runfiles.folder import MODEL_FILE

DATA = "shapes:100"


@pytest.mark.slow  # trains the two tiny demo runs, one epoch each
def test_an_interrupted_demo_continues_where_it_stopped(tmp_path, monkeypatch, capsys):
    """Killed after ShiftViT's stages and VIT-LSA's training, `toolkit demo --out DIR` says how
    far it got and finishes VIT-LSA alone: ShiftViT's files are not written again."""
    root = tmp_path / "demo"
    finished: list[str] = []

    def killed_in_vit_lsa_export(model: str, run_dir: Path) -> bool:
        if model == "vit-lsa":
            raise KeyboardInterrupt
        (run_dir / VERIFY_FILE).write_text(json.dumps({"passed": True}))
        (run_dir / BENCH_FILE).write_text("{}")
        return True

    monkeypatch.setattr(demo, "_after_training", killed_in_vit_lsa_export)
    assert main(["demo", "--data", DATA, "--epochs", "1", "--out", str(root)]) == 130
    first = capsys.readouterr().out
    assert f"(if interrupted: `toolkit demo --out {root}` continues)" in first
    assert demo.progress(root / "shiftvit") == demo.DONE
    assert demo.progress(root / "vit-lsa") == demo.TRAINED
    shiftvit_model = (root / "shiftvit" / MODEL_FILE).stat().st_mtime_ns

    def finish(model: str, run_dir: Path) -> bool:
        finished.append(model)
        return True

    monkeypatch.setattr(demo, "_after_training", finish)
    assert main(["demo", "--out", str(root)]) == 0
    printed = capsys.readouterr().out
    assert f"== continuing the demo in {root} (shiftvit done, vit-lsa trained)" in printed
    assert "training the tiny preset" not in printed and finished == ["vit-lsa"]
    assert (root / "shiftvit" / MODEL_FILE).stat().st_mtime_ns == shiftvit_model
    assert "demo finished, every verification passed" in printed


def test_a_demo_folder_holding_other_files_is_refused(tmp_path, capsys):
    """A folder at --out/MODEL that is no run folder is not the demo's to continue."""
    (tmp_path / "demo" / "vit-lsa").mkdir(parents=True)
    (tmp_path / "demo" / "vit-lsa" / "notes.txt").write_text("mine")
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"toolkit: error: {tmp_path / 'demo' / 'vit-lsa'} already exists and is no demo run: "
        "pass another --out"
    )
