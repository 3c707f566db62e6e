"""toolkit.runfiles: the typed readers of config.json, model.json, verify.json and bench.json
(issue 56). Each reads the files a tiny run writes and round-trips them byte for byte; files
older versions wrote (keys missing) still load; one missing-file policy (read_X: a one-line
UsageError naming the command that writes the file, find_X: None), a truncated file a one-line
UsageError; no module outside toolkit/runfiles/ opens these four files by name; no Keras."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
from tiny_runs import copy_tiny_run

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.runfiles import (
    EXPORT_DIR,
    BenchReport,
    Manifest,
    RunConfig,
    VerifyReport,
    bench_path,
    config_path,
    edit_manifest,
    find_bench,
    find_config,
    find_manifest,
    find_verify,
    manifest_path,
    read_bench,
    read_config,
    read_manifest,
    read_verify,
    verify_path,
    write_bench,
    write_config,
    write_manifest,
    write_verify,
)
from toolkit.runfiles.folder import Run, open_run

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("config.json", "model.json", "verify.json", "bench.json")
CONSTANTS = ("CONFIG_FILE", "MANIFEST_FILE", "VERIFY_FILE", "BENCH_FILE")

# file -> why it still names one of the four files; each entry is a debt, and an entry whose
# file no longer does fails test_the_allowance_lists_no_file_that_is_clean
ALLOWED_SITES: dict[str, str] = {}  # a module named here may name the files (none needs to)


def _as_written(data: dict) -> str:
    """The bytes every stage writes for a JSON object (toolkit.common.atomic.write_json)."""
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


# -- real files of a tiny run ---------------------------------------------------------------


@pytest.fixture(scope="module")
def measured(tiny_runs, tmp_path_factory) -> Path:
    """The exported tiny run, copied, then verified (model level, 16 images, LiteRT) and
    benched (its .tflite on LiteRT, 3 calls): the four files as the stages write them."""
    from toolkit.bench import bench_run
    from toolkit.verify import verify_run

    run = copy_tiny_run(tiny_runs.exported("shiftvit"), tmp_path_factory.mktemp("rf") / "run")
    verify_run(run, level="models", runtimes="litert", samples=16)  # saves verify.json
    bench_run(run, runtime="litert", format="tflite", runs=3, warmup=1)
    return run


@pytest.mark.slow
def test_each_reader_reads_what_the_stages_wrote(measured):
    config, manifest = read_config(measured), read_manifest(measured / EXPORT_DIR)
    verify, bench = read_verify(measured), read_bench(measured)
    raw = json.loads(config_path(measured).read_text())
    assert (config.model, config.preset, config.data) == ("shiftvit", "tiny", "shapes:300")
    assert config.image_shape == tuple(raw["dataset"]["image_shape"]) and config.seed == 0
    assert (
        config.num_classes == raw["dataset"]["num_classes"] == len(open_run(measured).class_names)
    )
    assert config.test_images == raw["dataset"]["splits"]["test"]
    entry = manifest.artifacts["tflite"]
    assert (measured / EXPORT_DIR / entry.file).is_file() and entry.runtime == "litert"
    assert manifest.class_names == tuple(open_run(measured).class_names)
    assert entry.parity is not None and entry.parity["verified"] == verify.date
    assert verify.passed is True and verify.models is not None and verify.models.samples == 16
    cell = verify.models.scored_cell("tflite", "litert")
    report = json.loads(verify_path(measured).read_text())
    raw_cell = next(
        c for c in report["models"]["cells"] if (c["format"], c["runtime"]) == ("tflite", "litert")
    )
    assert cell.top1 == raw_cell["metrics"]["top1_accuracy"]
    assert verify.models.reference_top1 == report["models"]["reference"]["top1_accuracy"]
    row = bench.row("tflite", "litert")
    assert row is not None and row.ok and row.p50_ms > 0 and row.file == entry.file
    assert row.sha256 == entry.sha256 and bench.threads == report_threads(measured)


def report_threads(run: Path) -> int:
    return json.loads(bench_path(run).read_text())["protocol"]["threads"]


@pytest.mark.slow
def test_the_files_round_trip_byte_for_byte(measured, tmp_path):
    files = {
        config_path(measured): read_config(measured),
        manifest_path(measured / EXPORT_DIR): read_manifest(measured / EXPORT_DIR),
        verify_path(measured): read_verify(measured),
        bench_path(measured): read_bench(measured),
    }
    for path, typed in files.items():
        assert _as_written(typed.to_json()) == path.read_text(), path.name
    write_config(tmp_path, files[config_path(measured)])
    write_verify(verify_path(tmp_path), files[verify_path(measured)])
    write_bench(tmp_path, files[bench_path(measured)])
    for name in ("config.json", "verify.json", "bench.json"):
        assert (tmp_path / name).read_bytes() == (measured / name).read_bytes()
    edited = tmp_path / "export"
    edited.mkdir()
    manifest_path(edited).write_bytes(manifest_path(measured / EXPORT_DIR).read_bytes())
    assert edit_manifest(edited, lambda old: old) == read_manifest(measured / EXPORT_DIR)
    assert manifest_path(edited).read_bytes() == manifest_path(measured / EXPORT_DIR).read_bytes()


# -- files older versions wrote ---------------------------------------------------------------

OLD_CONFIG = {  # before preprocessing, norm_stats, distribution and val_fraction were recorded
    "options": {"model": "vit", "preset": "tiny", "data": "shapes:100", "seed": 3},
    "preset": {"arch": {"image_size": 32}, "train": {"batch_size": 64}},
    "dataset": {"image_shape": [32, 32, 3], "num_classes": 10},
}
OLD_MANIFEST = {  # before source_model_sha256, class_names and per-file sha256
    "source_run": "/runs/old",
    "model": "vit",
    "artifacts": {"tflite": {"file": "model_fp32.tflite", "format": "tflite"}},
}
OLD_VERIFY = {"date": "2025-01-01T00:00:00+00:00", "passed": True, "ops": {"cells": []}}
OLD_BENCH = {  # before rows recorded the sha256 of the file they timed
    "date": "2025-01-01T00:00:00+00:00",
    "rows": [{"format": "tflite", "runtime": "litert", "batch": 1, "status": "ok", "p50_ms": 1.5}],
}


def test_files_older_versions_wrote_still_load(tmp_path):
    for name, data in (("config.json", OLD_CONFIG), ("verify.json", OLD_VERIFY)):
        (tmp_path / name).write_text(_as_written(data))
    (tmp_path / "bench.json").write_text(_as_written(OLD_BENCH))
    (tmp_path / "export").mkdir()
    manifest_path(tmp_path / "export").write_text(_as_written(OLD_MANIFEST))
    config = read_config(tmp_path)
    assert (config.model, config.seed, config.image_size) == ("vit", 3, 32)
    assert config.preprocessing is None and config.val_fraction is None
    assert config.norm_stats is None and config.test_images is None and config.distribution == {}
    manifest = read_manifest(tmp_path / "export")
    assert manifest.source_model_sha256 is None and manifest.class_names is None
    assert (
        manifest.artifacts["tflite"].sha256 is None and manifest.artifacts["tflite"].parity is None
    )
    assert manifest.formats_of("model_fp32.tflite") == ["tflite"]
    verify = read_verify(tmp_path)
    assert verify.models is None and verify.passed is True and verify.failures == ()
    row = read_bench(tmp_path).row("tflite", "litert")
    assert row is not None and row.sha256 is None and row.p50_ms == 1.5 and row.top1 is None
    assert _as_written(read_bench(tmp_path).to_json()) == _as_written(OLD_BENCH)


def test_a_run_given_config_json_s_object_reads_it_typed(tmp_path):
    run = Run(tmp_path, dict(OLD_CONFIG))
    assert isinstance(run.config, RunConfig) and run.seed == 3 and run.val_fraction is None


# -- one missing-file policy ------------------------------------------------------------------

READERS = (  # (read, find, the command the message names, the folder under tmp_path)
    (read_config, find_config, "toolkit train", ""),
    (read_manifest, find_manifest, "toolkit export", "export"),
    (read_verify, find_verify, "toolkit verify", ""),
    (read_bench, find_bench, "toolkit bench", ""),
)


@pytest.mark.parametrize(("read", "find", "command", "sub"), READERS)
def test_a_missing_file_is_none_to_find_and_a_line_naming_its_writer_to_read(
    tmp_path, read, find, command, sub
):
    folder = tmp_path / sub
    folder.mkdir(exist_ok=True)
    assert find(folder) is None
    with pytest.raises(UsageError) as raised:
        read(folder)
    message = str(raised.value)
    assert command in message and "\n" not in message


@pytest.mark.parametrize(("read", "find", "command", "sub"), READERS)
@pytest.mark.parametrize("content", [b'{"options": {"mod', b"[1, 2]", b"\xff\xfe{}"])
def test_a_truncated_or_foreign_file_is_one_line_to_both(
    tmp_path, read, find, command, sub, content
):
    folder = tmp_path / sub
    folder.mkdir(exist_ok=True)
    name = {read_config: "config.json", read_manifest: "model.json"}.get(read)
    path = folder / (name or f"{command.split()[1]}.json")
    path.write_bytes(content)
    for reader in (read, find):
        with pytest.raises(UsageError, match=r"is unreadable \(") as raised:
            reader(folder)
        assert str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_a_config_without_the_model_s_facts_is_refused_in_one_line(tmp_path):
    broken = {**OLD_CONFIG, "dataset": {"image_shape": [32, 32], "num_classes": 10}}
    config_path(tmp_path).write_text(json.dumps(broken))
    with pytest.raises(UsageError, match=r"dataset.image_shape \[32, 32\] is not \[height"):
        read_config(tmp_path)
    with pytest.raises(UsageError, match="options.model 'resnet' is not one of"):
        RunConfig.from_json({**OLD_CONFIG, "options": {**OLD_CONFIG["options"], "model": "resnet"}})


def test_a_manifest_listing_nothing_is_refused_to_a_stage_but_found(tmp_path):
    manifest_path(tmp_path).write_text(_as_written({"model": "vit", "artifacts": {}}))
    assert find_manifest(tmp_path) == Manifest(artifacts={}, model="vit")
    with pytest.raises(UsageError, match="lists no artifacts"):
        read_manifest(tmp_path)


def test_edit_manifest_rebuilds_an_unreadable_one(tmp_path):
    manifest_path(tmp_path).write_text('{"artifacts": {"tfl')
    written = edit_manifest(tmp_path, lambda old: {**old, "artifacts": {"onnx": {"file": "m"}}})
    assert list(written.artifacts) == ["onnx"] and read_manifest(tmp_path) == written


def test_write_manifest_writes_a_whole_file_as_the_stages_do(tmp_path):
    written = write_manifest(tmp_path, OLD_MANIFEST)
    assert manifest_path(tmp_path).read_text() == _as_written(OLD_MANIFEST)
    assert read_manifest(tmp_path) == written and written.source_run == "/runs/old"


def test_class_names_beside_a_truncated_model_json_are_refused_not_guessed(tmp_path):
    """The class-name rule read an unreadable model.json as none and gave the indices."""
    from toolkit.runfiles.classnames import class_names_of

    (tmp_path / "model.onnx").write_bytes(b"no ONNX model: no names of its own")
    manifest_path(tmp_path).write_text('{"class_names": ["cat", "d')
    with pytest.raises(UsageError, match=r"model.json is unreadable \(") as raised:
        class_names_of(tmp_path / "model.onnx", 2)
    assert "\n" not in str(raised.value)


def test_bench_of_a_truncated_export_folder_is_one_line_exit_2(tmp_path, capsys):
    """The reader's refusal reaches the command line as one line, exit code 2."""
    manifest_path(tmp_path).write_text('{"artifacts": {"tflite": {"fi')
    assert main(["bench", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{manifest_path(tmp_path)} is unreadable" in err
    assert not bench_path(tmp_path).exists()


# -- typed values -------------------------------------------------------------------------------


def test_typed_values_read_what_the_object_holds():
    report = VerifyReport.from_json(
        {
            "date": "d",
            "models": {
                "reference": {"top1_accuracy": 0.5},
                "cells": [
                    {"format": "onnx", "runtime": "ort-cpu", "metrics": {"top1_accuracy": None}},
                    {"format": "onnx", "runtime": "ort-cpu", "metrics": {"top1_accuracy": 0.25}},
                ],
            },
        }
    )
    assert report.models.reference_top1 == 0.5
    assert report.models.scored_cell("onnx", "ort-cpu").top1 == 0.25
    assert report.models.scored_cell("onnx", "litert") is None
    bench = BenchReport.from_json({"protocol": {"threads": 2}, "machine": {"versions": {"a": 1}}})
    assert bench.threads == 2 and bench.versions == {"a": 1} and bench.rows == ()
    assert Manifest.from_json({"macs_per_image": 7, "artifacts": {}}).macs_per_image == 7


# -- the readers are the only place that names the files ----------------------------------------


def file_sites(path: Path) -> list[str]:
    """`line: what` for each place `path` names one of the four files: a string that is the
    file's name or a path ending in it (prose is not), or a path joined with the name's
    constant."""
    source = path.read_text()
    sites = []
    strings = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in strings:
            text = token.string.strip("rbfRBF").strip("\"'")
            path = " " not in text and any(text == n or text.endswith("/" + n) for n in NAMES)
            if path:
                sites.append(f"{token.start[0]}: {token.string}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            if isinstance(right, ast.Name) and right.id in CONSTANTS:
                sites.append(f"{node.lineno}: / {right.id}")
    return sites


def all_sites(root: Path = ROOT) -> dict[str, list[str]]:
    """Relative file -> its sites, for every module of toolkit/ and studies/ outside the
    readers (toolkit/runfiles/)."""
    found = {}
    for path in sorted([*(root / "toolkit").rglob("*.py"), *(root / "studies").rglob("*.py")]):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(("toolkit/runfiles/", "studies/tests/")):
            continue
        sites = file_sites(path)
        if sites:
            found[relative] = sites
    return found


def test_no_module_outside_the_readers_names_the_four_files():
    """config.json, model.json, verify.json and bench.json are opened through toolkit.runfiles
    alone (its read_/find_/write_ functions and *_path helpers)."""
    found = {f: s for f, s in all_sites().items() if f not in ALLOWED_SITES}
    assert found == {}


def test_the_allowance_lists_no_file_that_is_clean():
    assert sorted(set(ALLOWED_SITES) - set(all_sites())) == []


def test_the_site_scan_sees_a_name_and_a_join(tmp_path):
    module = tmp_path / "toolkit" / "stage.py"
    module.parent.mkdir()
    module.write_text(
        '"""Reads config.json."""\n'
        "import json\n"
        "def a(run):\n"
        '    return json.loads((run / "verify.json").read_text())\n'
        "def b(run):\n"
        "    return run / MANIFEST_FILE\n"
        "def c(run):\n"
        '    return f"{run}/bench.json"\n'
    )
    (sites,) = all_sites(tmp_path).values()
    assert sorted(int(site.split(":")[0]) for site in sites) == [4, 6, 8]


def test_the_run_folder_s_readers_import_no_keras():
    code = (
        "import sys, toolkit.runfiles, toolkit.runfiles.folder, toolkit.runfiles.hashes\n"
        "import toolkit.runfiles.classnames\n"
        "print(sorted(m for m in ('keras', 'tensorflow', 'jax') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
