"""`toolkit ship` against faults and an earlier bundle with the user's files in it (issue 58):
a re-ship replaces only what ship wrote (model.json lists it) and keeps the rest, saying so; a
killed write check's probe is removed by the next ship; a full disk is one line, exit 1, with the
earlier bundle intact; an out-of-range --max-accuracy-drop is refused before any work.

Most tests ship a stand-in run whose stages are current (tests/test_ship.py's `write_run`);
the last ships a copy of the tiny exported run (slow).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_ship import WebParts, one_line_error, ship, write_run
from test_ship_web import _cached_package
from tiny_runs import copy_tiny_run

from toolkit.runtimes.web import npm
from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.ship import bundle, webapp
from toolkit.ship.bundle import SHIP_KEY

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def web_parts(monkeypatch) -> WebParts:
    """Stand-ins of the report and web app writers (tests/test_ship.py's)."""
    return WebParts(monkeypatch)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def leftovers(folder: Path) -> list[str]:
    """Scratch folders and temp files a ship could leave in `folder`."""
    return [p.name for p in folder.iterdir() if p.name.startswith(("toolkit-", "."))]


def user_files(out: Path) -> None:
    (out / "MY_NOTES.txt").write_text("my notes")
    (out / "userstuff").mkdir()
    (out / "userstuff" / "keep.txt").write_text("keep me")
    (out / "web" / "mine.css").write_text("my style")


# -- a re-ship keeps what ship did not write ----------------------------------------------------


def test_a_reship_keeps_the_users_files_and_says_so(tmp_path, web_parts, capsys):
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "web,server", "--max-accuracy-drop", "0.5") == 0
    assert (out / "model_int8.onnx").is_file()
    user_files(out)
    capsys.readouterr()
    assert ship(run, "--target", "web,android", "--max-accuracy-drop", "0") == 0
    assert (out / "MY_NOTES.txt").read_text() == "my notes"
    assert (out / "userstuff" / "keep.txt").read_text() == "keep me"
    assert (out / "web" / "mine.css").read_text() == "my style"
    assert not (out / "model_int8.onnx").exists()  # the earlier ship's: replaced
    kept = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("kept")]
    assert len(kept) == 1
    for name in ("MY_NOTES.txt", "userstuff/keep.txt", "web/mine.css", str(out)):
        assert name in kept[0]
    # model.json lists every file ship wrote, by sha256, and none of the user's
    listed = json.loads((out / "model.json").read_text())[SHIP_KEY]["files"]
    files = tree(out)
    assert set(listed) == set(files) - {"model.json", "MY_NOTES.txt", "userstuff/keep.txt"} - {
        "web/mine.css"
    }
    assert all(hashlib.sha256(files[p]).hexdigest() == digest for p, digest in listed.items())


def test_a_bundle_from_before_the_listing_keeps_what_ship_does_not_write(tmp_path, web_parts):
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "web,server") == 0
    manifest = json.loads((out / "model.json").read_text())
    manifest[SHIP_KEY].pop("files", None)  # as a ship before the listing wrote it
    (out / "model.json").write_text(json.dumps(manifest))
    user_files(out)
    assert ship(run, "--target", "android") == 0
    assert (out / "MY_NOTES.txt").read_text() == "my notes"
    assert (out / "userstuff" / "keep.txt").read_text() == "keep me"
    assert (out / "web" / "mine.css").read_text() == "my style"
    listed = json.loads((out / "model.json").read_text())[SHIP_KEY]["files"]
    mine = {"MY_NOTES.txt", "userstuff/keep.txt", "web/mine.css"}
    assert set(tree(out)) == {"model.json", *listed, *mine}  # the earlier ship's files: gone
    assert "model_int8.onnx" not in listed and "web/index.html" not in listed


def test_a_file_ship_wrote_and_the_user_changed_is_never_replaced(tmp_path, web_parts, capsys):
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "server") == 0
    (out / "README.md").write_text("my edits")
    before = tree(out)
    web_parts.calls.clear()
    assert ship(run, "--target", "server") == 2
    line = one_line_error(capsys)
    assert "README.md" in line and "changed since" in line and "--out" in line
    assert tree(out) == before and web_parts.calls == []  # refused before any work


def test_a_users_file_where_the_new_bundle_writes_is_refused_before_any_work(
    tmp_path, web_parts, capsys
):
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "web") == 0
    (out / "model.onnx").write_text("the user's own model.onnx")
    before = tree(out)
    web_parts.calls.clear()
    assert ship(run, "--target", "server") == 2
    line = one_line_error(capsys)
    assert "model.onnx" in line and "--out" in line
    assert tree(out) == before and web_parts.calls == []


def test_a_killed_ship_between_its_two_renames_loses_no_file(tmp_path, web_parts, monkeypatch):
    """kill -9 after the earlier bundle was moved aside, before the new one took its place:
    the next ship puts the earlier one back first."""
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "server") == 0
    (out / "MY_NOTES.txt").write_text("my notes")
    aside = run / f"toolkit-old-{dead_pid()}-abcdefgh"
    aside.mkdir()
    os.replace(out, aside / "ship")  # what the killed ship left
    assert ship(run, "--target", "server") == 0
    assert (out / "MY_NOTES.txt").read_text() == "my notes"
    assert not aside.exists()  # removed with the dead ship's scratch


def test_a_ship_beside_a_bundle_a_killed_ship_moved_aside_puts_it_back(tmp_path, web_parts):
    run = write_run(tmp_path)
    other = run / "other"
    assert ship(run, "--target", "server", "--out", other) == 0
    (other / "MY_NOTES.txt").write_text("my notes")
    aside = run / f"toolkit-old-{dead_pid()}-abcdefgh"
    aside.mkdir()
    os.replace(other, aside / "other")  # a killed ship to --out RUN/other left this
    assert ship(run, "--target", "server") == 0  # to RUN/ship, beside it
    assert (other / "MY_NOTES.txt").read_text() == "my notes"


def dead_pid() -> str:
    """The pid of a process that has ended."""
    code = "import os; print(os.getpid())"
    done = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True, check=True)
    return done.stdout.strip()


# -- a killed write check ------------------------------------------------------------------------


def test_a_probe_a_killed_write_check_left_is_removed_by_the_next_ship(tmp_path, web_parts,
                                                                     capsys):  # fmt: skip
    run = write_run(tmp_path)
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from toolkit.common import atomic\n"
        "os.unlink = lambda path: os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomic.check_writable_folder_above(Path(sys.argv[1]), 'x', 'y')\n"
    )
    killed = subprocess.run([sys.executable, "-c", code, str(run / "ship")], check=False)
    assert killed.returncode == -9
    (probe,) = [p for p in run.iterdir() if p.name.startswith(".toolkit-write-check.")]
    assert ship(run, "--target", "server") == 0
    assert not probe.exists()
    assert not [p for p in run.iterdir() if p.name.startswith(".toolkit-write-check.")]
    # a ship with nothing to do (stages current) removes them too, in the run and in its
    # bundle, where a probe is no file of the user's to keep
    for folder in (run, run / "ship", run / "ship" / "web"):
        folder.mkdir(exist_ok=True)
        (folder / f".toolkit-write-check.{dead_pid()}.abcd1234").write_text("")
    capsys.readouterr()
    assert ship(run, "--target", "server") == 0
    printed = capsys.readouterr().out
    assert "are current: reused" in printed and "toolkit-write-check" not in printed
    assert not [p for p in run.rglob(".toolkit-write-check.*")]


# -- a full disk ---------------------------------------------------------------------------------


@pytest.fixture
def web_app(tmp_path, monkeypatch) -> WebParts:
    """The real web app writer on a stand-in npm package; the report a stand-in."""
    monkeypatch.setenv(npm.CACHE_ENV, str(tmp_path / "npm-cache"))
    for library in LIBRARIES:  # each library the web pick may name
        _cached_package(tmp_path / "npm-cache", library)
    parts = WebParts(monkeypatch)
    monkeypatch.setattr(bundle, "write_web_app", webapp.write_web_app)
    monkeypatch.setattr(bundle, "package_dir", npm.package_dir)
    return parts


def copy_failing(monkeypatch, suffix: str) -> None:
    """shutil.copyfile finds the disk full when it writes a file ending in `suffix`."""
    real = shutil.copyfile

    def copyfile(src, dst, **kwargs):
        if str(dst).endswith(suffix):
            raise OSError(ENOSPC.errno, ENOSPC.strerror)
        return real(src, dst, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copyfile)


def test_a_full_disk_while_copying_the_wasm_files_is_one_line_and_keeps_the_bundle(
    tmp_path, web_app, monkeypatch, capsys
):
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "web") == 0
    assert (out / "web" / "lib" / "@litertjs" / "core" / "wasm" / "stand-in.wasm").is_file()
    (out / "MY_NOTES.txt").write_text("my notes")
    before = tree(out)
    capsys.readouterr()
    copy_failing(monkeypatch, ".wasm")
    assert ship(run, "--target", "web,server") == 1
    line = one_line_error(capsys)
    assert "no space left on device" in line and str(out) in line and "again" in line
    assert tree(out) == before
    assert leftovers(run) == [] and leftovers(out) == []


@pytest.mark.parametrize("suffix", [".onnx", "README.md"])
def test_a_full_disk_while_writing_the_bundle_is_one_line_and_writes_nothing(
    tmp_path, web_parts, monkeypatch, capsys, suffix
):
    run = write_run(tmp_path)
    out = tmp_path / "new" / "bundle"
    if suffix == ".onnx":
        copy_failing(monkeypatch, suffix)
    else:
        real = Path.write_text

        def write_text(self, *args, **kwargs):
            if self.name.startswith(f".{suffix}."):
                raise OSError(ENOSPC.errno, ENOSPC.strerror)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", write_text)
    assert ship(run, "--target", "server", "--out", out) == 1
    line = one_line_error(capsys)
    assert "no space left on device" in line and str(out) in line
    assert not (tmp_path / "new").exists()


def test_a_full_disk_in_a_stage_is_one_line_naming_the_file(
    tmp_path, web_parts, monkeypatch, capsys
):
    """export's chained errors (a converter's error raised from the OSError) included."""
    run = write_run(tmp_path)
    out = run / "ship"
    assert ship(run, "--target", "server") == 0
    before = tree(out)
    target = run / "export" / "model_fp16.tflite"

    def run_stages(*args, **kwargs):
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        except OSError as exc:
            raise RuntimeError("the converter failed") from exc

    monkeypatch.setattr(bundle, "run_stages", run_stages)
    assert ship(run, "--target", "server") == 1
    line = one_line_error(capsys)
    assert "no space left on device" in line and str(target) in line and "again" in line
    assert tree(out) == before and leftovers(run) == []


# -- the budget ----------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", ["101", "1000000", "100.5"])
def test_a_budget_beyond_100_points_is_refused_before_any_work(tmp_path, web_parts, capsys, budget):
    run = write_run(tmp_path)
    assert ship(run, "--max-accuracy-drop", budget) == 2
    line = one_line_error(capsys)
    assert "--max-accuracy-drop" in line and "0 to 100" in line
    assert web_parts.calls == [] and web_parts.npm == [] and not (run / "ship").exists()


def test_a_budget_of_100_points_takes_every_file(tmp_path, web_parts):
    run = write_run(tmp_path)
    assert ship(run, "--max-accuracy-drop", "100", "--target", "server") == 0


# -- a full disk in the run folder, on a tiny trained run (slow) ---------------------------------


@pytest.mark.slow
def test_a_full_disk_in_the_run_folder_is_one_line_and_leaves_no_temp(
    tiny_runs, tmp_path, web_parts, monkeypatch, capsys
):
    run = copy_tiny_run(tiny_runs.exported("shiftvit"), tmp_path / "run")
    real = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.parent == run:  # the run's own files (verify.json, bench.json)
            raise OSError(ENOSPC.errno, ENOSPC.strerror)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    before = tree(run)
    assert ship(run, "--target", "server", "--bench-seconds", "0.05") == 1
    err = capsys.readouterr().err.strip().splitlines()  # the stages' progress, then the error
    assert "Traceback" not in "\n".join(err) and err[-1].startswith("toolkit: error: ")
    line = err[-1]
    assert "no space left on device" in line and str(run / "verify.json") in line
    assert tree(run) == before and leftovers(run) == []
