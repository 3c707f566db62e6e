"""Bad input: a one-line error naming the problem, exit code 2, nothing written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from PIL import Image

from toolkit.cli.main import main
from toolkit.data.shapes import CLASS_NAMES as SHAPES_CLASSES

# what `toolkit train` writes into config.json that open_run checks
RUN_CONFIG = json.dumps(
    {
        "options": {"model": "shiftvit", "preset": "tiny", "data": "shapes", "seed": 0},
        "preset": {"arch": {"image_size": 32}},
        "dataset": {"image_shape": [32, 32, 3], "num_classes": len(SHAPES_CLASSES)},
    }
)


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.fixture
def bad_inputs(tmp_path):
    x = np.zeros((40, 8, 8, 3), np.uint8)
    no_y = _npz(tmp_path / "no_y.npz", x=x)
    out_of_range = _npz(
        tmp_path / "range.npz", x=x, y=np.arange(40) % 4, class_names=np.array(["a", "b"])
    )
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "something").write_text("x")
    corrupt = tmp_path / "corrupt_run"
    corrupt.mkdir()
    (corrupt / "config.json").write_text(RUN_CONFIG)
    (corrupt / "labels.txt").write_text("\n".join(SHAPES_CLASSES) + "\n")
    (corrupt / "model.keras").write_bytes(b"not a zip")
    truncated = tmp_path / "truncated_run"
    truncated.mkdir()
    (truncated / "config.json").write_text(RUN_CONFIG)
    (truncated / "labels.txt").write_text("\n".join(SHAPES_CLASSES) + "\n")
    with zipfile.ZipFile(truncated / "model.keras", "w") as zf:
        zf.writestr("config.json", "{")
    empty = tmp_path / "empty_folder"
    empty.mkdir()
    one_class = tmp_path / "one_class"
    (one_class / "cat").mkdir(parents=True)
    for i in range(12):
        Image.fromarray(np.full((8, 8, 3), i, np.uint8)).save(one_class / "cat" / f"{i}.png")
    return {
        "unknown model": (["train", "--model", "resnet"], "unknown model"),
        "unknown preset": (["train", "--model", "shiftvit", "--preset", "huge"], "unknown preset"),
        "unknown data": (["train", "--model", "vit", "--data", "mnist"], "mnist"),
        "missing npz": (["train", "--model", "vit", "--data", f"npz:{tmp_path}/nope.npz"], "nope"),
        "npz without y": (["train", "--model", "vit", "--data", f"npz:{no_y}"], "y"),
        "labels out of range": (
            ["train", "--model", "vit", "--data", f"npz:{out_of_range}"],
            "range",
        ),
        "empty folder": (["train", "--model", "vit", "--data", f"folder:{empty}"], "empty_folder"),
        "bad precision": (["train", "--model", "vit", "--precision", "fp8"], "precision"),
        "bad strategy": (["train", "--model", "vit", "--strategy", "tpu"], "strategy"),
        "zero epochs": (["train", "--model", "vit", "--epochs", "0"], "epochs"),
        "existing run": (["train", "--model", "vit", "--out", str(existing)], "--resume"),
        "resume nothing": (["train", "--model", "vit", "--out", str(empty), "--resume"], "resume"),
        "missing run": (["eval", str(tmp_path / "no_run")], "does not exist"),
        "corrupt model": (["eval", str(corrupt)], "corrupt"),
        "truncated model": (["eval", str(truncated)], "could not be loaded"),
        "unknown command": (["fly"], "invalid choice"),
        "negative seed": (["train", "--model", "vit", "--seed", "-1"], "from 0 to 4294967295"),
        "huge seed": (["train", "--model", "vit", "--seed", str(10**23)], "from 0 to 4294967295"),
        "huge batch size": (
            ["train", "--model", "vit", "--data", "shapes:100", "--batch-size", "1000"],
            "more than the 80 training images of shapes:100: pass --batch-size 80 or less",
        ),
        "one class": (
            ["train", "--model", "vit", "--data", f"folder:{one_class}"],
            "has 1 class (cat): a classifier needs at least 2",
        ),
        "option typo": (["train", "--epochz", "3"], "did you mean '--epochs'?"),
        "author on two lines": (
            ["train", "--model", "vit", "--author", "A\nB"],
            "--author 'A\\nB' must be printable text on one line",
        ),
    }


CASES = [
    "unknown model", "unknown preset", "unknown data", "missing npz", "npz without y",
    "labels out of range", "empty folder", "bad precision", "bad strategy", "zero epochs",
    "existing run", "resume nothing", "missing run", "corrupt model", "truncated model",
    "unknown command", "negative seed", "huge seed", "huge batch size", "one class",
    "option typo", "author on two lines",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, bad_inputs, tmp_path, capsys,
                                                         monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv, needle = bad_inputs[case]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("toolkit: error:")
    assert needle in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_console_script_exits_2_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "eval", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("toolkit: error:")


def test_train_help_names_every_model_and_preset(capsys):
    from toolkit.models.presets import PRESET_PURPOSES, PRESETS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    # one line per paragraph; argparse may wrap a name at its hyphen (shift-t-light)
    text = " ".join(re.sub(r"-\n\s+", "-", capsys.readouterr().out).split())
    preset_help = text.split("--preset PRESET")[-1].split("--data DATA")[0]
    model_help = text.split("--model MODEL")[-1].split("--preset PRESET")[0]
    assert [name for name in PRESET_PURPOSES if name not in preset_help] == []
    assert [name for name in PRESETS if name not in model_help] == []


def test_presets_prints_the_tables_of_docs_presets(capsys):
    """`toolkit presets` lists every preset, the ImageNet ones at 224x224 beside the paper."""
    from toolkit.models.presets import PRESETS
    from toolkit.models.table import DOC

    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    doc = DOC.read_text()
    for marker in ("presets", "paper-cifar-presets", "paper-presets"):
        block = doc.split(f"<!-- {marker}:begin -->\n", 1)[1].split(f"<!-- {marker}:end -->")[0]
        assert block.strip() in out
    rows = [line.split(" | ")[:2] for line in out.splitlines() if line.startswith("| ")]
    listed = {(model.lstrip("| "), name) for model, name in rows}
    assert {(m, p) for m in PRESETS for p in PRESETS[m]} <= listed
    assert "| shiftvit | shift-t | Shift-T |" in out and "| 28,566,472 | 29 M |" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "RUN", "--format", "tflite,,onnx"],
        ["export", "RUN", "--format", "tflite,"],
        ["export", "RUN", "--format", ","],
        ["bench", "RUN", "--runtime", "litert,,ort-cpu"],
        ["bench", "RUN", "--batch", "1,,32"],
        ["bench", "RUN", "--runtime", ",litert"],
    ],
    ids=lambda argv: " ".join(argv[2:]),
)
def test_an_empty_item_of_a_comma_list_is_refused(argv, tmp_path, capsys):
    """`--format 'tflite,,onnx'` was read as tflite,onnx while `--format ','` was refused: an
    empty item is a typo in every comma list, refused in one line before the run is read."""
    argv = [str(tmp_path / "run") if a == "RUN" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("toolkit: error: ") and "\n" not in err
    assert f"{argv[-1]!r} has an empty item: separate the items by single commas" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "RUN", "--runtime="],  # was the default runtimes: a whole bench ran
        ["eval", "RUN", "--data", ""],  # was the run's data
        ["verify", "RUN", "--runtime", " "],
        ["export", "RUN", "--format="],
        ["ship", "RUN", "--target", ""],
        ["train", "--model", ""],
        ["train", "--model", "shiftvit", "--data=", "--epochs", "1"],
        ["train", "--model", "shiftvit", "--recipe", ""],
        ["train", "--model", "shiftvit", "--precision", ""],
    ],
    ids=lambda argv: " ".join(argv[:1] + argv[2:]),
)
def test_an_empty_value_is_refused_by_one_rule_in_every_command(argv, tmp_path, capsys):
    """An empty value meant the default for some options and was refused, each in its own
    words, by others: now every option's empty value is one line naming the option, before
    any work; leaving the option out gives its default."""
    argv = [str(tmp_path / "run") if a == "RUN" else a for a in argv]
    flag = next(a.split("=")[0] for a in argv if a.startswith("--") and (a.endswith("=") or
                argv[argv.index(a) + 1 :][:1] in ([""], [" "])))  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"toolkit: error: {flag} is empty: leave {flag} out for its default, or give it a value "
        f"(see `toolkit {argv[0]} --help`)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--model", "shiftvit", "--out", ""],
        ["export", "RUN", "--out", " "],
        ["ship", "RUN", "--out", ""],
        ["verify", ""],
        ["bench", ""],
        ["predict", "", "x.png"],
    ],
)
def test_an_empty_path_is_refused_not_taken_as_the_current_folder(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "got an empty one" in err[0], err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["ship", "RUN", "--target", "web,web"], "--target 'web,web' names web twice"),
        (["export", "RUN", "--format", "onnx,onnx"], "format 'onnx,onnx' names onnx twice"),
        (["bench", "RUN", "--runtime", "litert,litert"], "'litert,litert' names litert twice"),
    ],
)
def test_a_list_item_typed_twice_is_refused_in_one_line(argv, said, tmp_path, capsys):
    assert main([argv[0], str(tmp_path / "run"), *argv[2:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "name each once" in err[0], err


def test_the_codes_own_lists_may_repeat_a_name():
    from toolkit.common.argtypes import choose_names

    assert choose_names(["a", "a"], ["a", "b"], "--x") == ["a"]


def test_commands_that_load_a_run_model_print_no_native_log_lines(tiny_runs, tmp_path):
    """bench (even of a bad --format) and predict of RUN/model.keras load the model, which
    imported TensorFlow with its C++ start-up lines ("Could not find cuda drivers", oneDNN,
    absl) before the toolkit's own line: their stderr is the toolkit's alone."""
    run = tiny_runs.trained("shiftvit")
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tmp_path / "black.png")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    script = [sys.executable, "-m", "toolkit.cli"]
    bench = subprocess.run(
        [*script, "bench", str(run), "--format", "bogus"], capture_output=True, text=True, env=env
    )
    assert bench.returncode == 2
    assert bench.stderr.strip().splitlines() == [bench.stderr.strip()]
    assert bench.stderr.startswith("toolkit: error: ")
    predict = subprocess.run(
        [*script, "predict", str(run / "model.keras"), str(tmp_path / "black.png")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert predict.returncode == 0 and predict.stderr == "", predict.stderr
    assert predict.stdout.startswith(f"{tmp_path / 'black.png'}: ")
