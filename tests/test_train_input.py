"""`toolkit train`'s input: --recipe and --arch values (none/off, finite numbers, each key once,
no empty override) and the architecture's geometry and first batch, refused in one line with
exit 2 before the run folder is made (issue 58)."""

from __future__ import annotations

import json
import os
import typing
from dataclasses import fields, replace
from pathlib import Path

import pytest

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data.augment import Augmentation
from toolkit.models import geometry
from toolkit.models.geometry import (
    VALUE_BYTES,
    batch_bytes,
    check_geometry,
    footprint,
    machine_memory,
    shiftvit_maps,
)
from toolkit.models.overrides import OFF_VALUES, parse_arch, parse_recipe
from toolkit.models.presets import PRESETS, get_preset, workload
from toolkit.models.recipes import TrainRecipe, recipe_keys
from toolkit.training import train as train_module
from toolkit.training.options import TrainOptions, resume_options, validate
from toolkit.training.strategies import PRECISIONS
from toolkit.training.train import train


def _hints(*classes: type) -> dict[str, object]:
    return {k: v for cls in classes for k, v in typing.get_type_hints(cls).items()}


_RECIPE_HINTS = _hints(TrainRecipe, Augmentation)
# every recipe key of a numeric or boolean type (X | None fields took none already)
_NUMERIC = [k for k in recipe_keys() if _RECIPE_HINTS[k] in OFF_VALUES]


@pytest.mark.parametrize("key", _NUMERIC)
@pytest.mark.parametrize("word", ["none", "None"])
def test_none_switches_every_numeric_recipe_piece_off(key, word):
    """`0 or none switches one off` (`toolkit train --help`): the type's zero, for every
    numeric or boolean field, those added later too."""
    assert parse_recipe(f"{key}={word}") == {key: OFF_VALUES[_RECIPE_HINTS[key]]}


def test_the_issue_pieces_take_none():
    text = "mixup=none,cutmix=none,label_smoothing=none,erasing=none,flip=none,rotation=off"
    assert parse_recipe(text) == {
        "mixup": 0.0,
        "cutmix": 0.0,
        "label_smoothing": 0.0,
        "erasing": 0.0,
        "flip": False,
        "rotation": 0.0,
    }
    assert parse_arch("shiftvit", "drop_path=none,dropout=off") == {
        "drop_path": 0.0,
        "dropout": 0.0,
    }
    assert parse_arch("vit", "qkv_bias=none") == {"qkv_bias": False}


@pytest.mark.parametrize(
    "flag, model, text, example",
    [
        ("--recipe", None, "mixup=high", "e.g. mixup=0.1, or none (off)"),
        ("--recipe", None, "flip=maybe", "e.g. flip=true, or none (off)"),
        ("--recipe", None, "repeat_augment=2.5", "e.g. repeat_augment=1"),
        ("--recipe", None, "rand_augment=2", "e.g. rand_augment=2:0.1, or none (off)"),
        ("--arch", "shiftvit", "patch_size=x", "e.g. patch_size=4"),
        ("--arch", "shiftvit", "depths=2:x", "e.g. depths=2:4:8:2"),
        ("--arch", "vit", "head=cls", "flatten or class_token, e.g. head=flatten"),
    ],
)
def test_a_bad_value_names_the_field_the_value_and_an_example(flag, model, text, example):
    with pytest.raises(UsageError) as error:
        parse_recipe(text) if model is None else parse_arch(model, text)
    message = str(error.value)
    key, _, value = text.partition("=")
    assert message.startswith(f"{flag} {text}: {key} takes ")
    assert example in message and "<class" not in message and "\n" not in message


@pytest.mark.parametrize(
    "text", ["lr_max=nan", "weight_decay=inf", "mixup=-inf", "ema=nan", "rand_augment=2:nan"]
)
def test_non_finite_recipe_numbers_are_refused(text):
    with pytest.raises(UsageError, match="takes a finite number|numbers joined by colons"):
        parse_recipe(text)


@pytest.mark.parametrize("text", ["drop_path=nan", "mlp_ratio=inf", "epsilon=NaN"])
def test_non_finite_arch_numbers_are_refused(text):
    with pytest.raises(UsageError, match="takes a finite number"):
        parse_arch("shiftvit", text)


@pytest.mark.parametrize(
    "parse, text, key",
    [
        (parse_recipe, "mixup=0.5,mixup=0.8", "mixup"),
        (parse_recipe, "flip=true,erasing=0.1,flip=false", "flip"),
        (lambda text: parse_arch("shiftvit", text), "drop_path=0.1,drop_path=0.2", "drop_path"),
    ],
)
def test_a_key_given_twice_is_refused(parse, text, key):
    with pytest.raises(UsageError, match=f"sets {key} twice") as error:
        parse(text)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text", ["", " ", "mixup=0.5,", ",mixup=0.5"])
def test_an_empty_override_or_item_is_refused(text):
    for flag, parse in (("--recipe", parse_recipe), ("--arch", lambda t: parse_arch("vit", t))):
        with pytest.raises(UsageError, match="leave .* out|empty item") as error:
            parse(text)
        assert str(error.value).startswith(flag)
    assert parse_recipe(None) == {} and parse_arch("vit", None) == {}  # not given: the preset's


def _no_folder(monkeypatch) -> None:
    """Fail the test if `toolkit train` gets as far as holding (creating) its run folder."""

    def held(out):
        raise AssertionError(f"the run folder {out} was made before the refusal")

    monkeypatch.setattr(train_module, "hold_run_folder", held)


@pytest.mark.parametrize(
    "model, text, words",
    [
        ("shiftvit", "patch_size=64", "patch_size 64 does not divide image_size 32"),
        ("shiftvit", "patch_size=3", "pass --arch patch_size=2, say, or image_size=33"),
        ("vit", "patch_size=5", "patch_size 5 does not divide image_size 32"),
        ("vit-lsa", "image_size=30", "patch_size 4 does not divide image_size 30"),
        ("shiftvit", "shift_pixel=100", "shift_pixel 100 moves"),
        ("shiftvit", "shift_pixel=8", "first stage's 8x8 maps"),
        ("shiftvit", "depths=1:1:1:1:1", "stage 4's map is already 1x1"),
        ("shiftvit", "image_size=100000", "needs at least"),
        ("vit", "image_size=2400", "needs at least"),
    ],
)
def test_geometry_is_refused_before_the_run_folder(model, text, words, tmp_path, monkeypatch):
    _no_folder(monkeypatch)
    options = TrainOptions(model, "tiny", "shapes:200", epochs=1, arch=text)
    with pytest.raises(UsageError, match="pass ") as error:
        train(options, out=tmp_path / "run")
    assert words in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "flag, text",
    [
        ("--arch", "image_size=100000"),
        ("--arch", "patch_size=64"),
        ("--recipe", "lr_max=nan"),
        ("--recipe", "weight_decay=inf"),
        ("--recipe", "mixup=0.5,mixup=0.8"),
        ("--recipe", ""),
        ("--arch", ""),
    ],
)
def test_the_command_exits_2_in_one_line_and_writes_nothing(flag, text, tmp_path, capsys):
    out = tmp_path / "runs" / "run"
    argv = ["train", "--model", "shiftvit", "--data", "shapes:200", "--epochs", "1"]
    assert main([*argv, f"{flag}={text}", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and flag.strip("-") in err
    assert not (tmp_path / "runs").exists()


def test_the_first_batch_must_fit_the_memory(monkeypatch):
    arch = replace(get_preset("shiftvit", "tiny").arch, image_size=256)
    need = batch_bytes(arch, 64)
    check_geometry(arch, 64, memory=need)  # fits exactly
    with pytest.raises(UsageError, match="pass --batch-size 16, say") as error:
        check_geometry(arch, 64, memory=need - 1)  # 16 is the largest 2^k under half of it
    assert "batch of 64 images at image_size 256" in str(error.value)
    assert batch_bytes(arch, 16) * 2 <= need - 1 < batch_bytes(arch, 32) * 2
    # half precision keeps half the bytes per value; the weights cost the same
    cost = footprint(arch)
    assert need - batch_bytes(arch, 64, "mixed_bfloat16") == 64 * cost.activations * 2
    # a multi-process run checks a process's share of the batch
    monkeypatch.setattr(geometry, "machine_memory", lambda: batch_bytes(arch, 16))
    options = TrainOptions("shiftvit", "tiny", batch_size=64, arch="image_size=256")
    with pytest.raises(UsageError, match="needs at least"):
        validate(options)
    assert validate(options, processes=4).arch == arch


def test_every_precision_has_its_bytes_per_value():
    assert set(VALUE_BYTES) == set(PRECISIONS)


def _classifier(arch, num_classes: int) -> int:
    """Weights of the logits Dense the footprint leaves out (the class count is the data's)."""
    if hasattr(arch, "depths"):  # ShiftViT: the last stage's width
        width = arch.dim * 2 ** (len(arch.depths) - 1)
    else:  # the class token's width, or the flatten head's last
        width = arch.dim if arch.head == "class_token" else arch.head_units[-1]
    return width * num_classes + num_classes


@pytest.mark.parametrize("model", list(PRESETS))
def test_footprint_weights_are_the_built_models(model):
    """The weights counted without Keras equal the built models' (preset_counts.json, counted
    from built models and checked against them by tests/test_macs.py)."""
    shipped = json.loads((Path(geometry.__file__).with_name("preset_counts.json")).read_text())
    for name in PRESETS[model]:
        preset, work = get_preset(model, name), workload(name)
        key = f"{model}/{name}/{'x'.join(map(str, work.input_shape))}/{work.num_classes}"
        counted = footprint(preset.arch).parameters + _classifier(preset.arch, work.num_classes)
        assert counted == shipped[key]["params"], key


def test_shiftvit_maps_are_the_built_models():
    """Each stage's map side, merges rounding up (48 / 4 = 12, 6, 3, 2), as the model has it."""
    from toolkit.models import build_model

    preset = get_preset("shiftvit", "tiny")
    preset = replace(preset, arch=replace(preset.arch, image_size=48))
    model = build_model(preset, (32, 32, 3), 10)
    built = [
        model.get_layer(f"stage{i}_block0_shift").output.shape[1]
        for i in range(len(preset.arch.depths))
    ]
    assert shiftvit_maps(preset.arch) == built == [12, 6, 3, 2]


def test_activations_count_what_the_backward_pass_keeps():
    """ShiftViT tiny by hand: the 32x32x3 input; per block the norm's input and output and the
    MLP's hidden layer before and after GELU; per merge its norm's input and output."""
    arch = get_preset("shiftvit", "tiny").arch  # dim 32, depths 1-1-2-1, mlp ratio 2
    blocks = sum(
        depth * side * side * (2 * width + 2 * 2 * width)
        for depth, side, width in [(1, 8, 32), (1, 4, 64), (2, 2, 128), (1, 1, 256)]
    )
    merges = 2 * (8 * 8 * 32 + 4 * 4 * 64 + 2 * 2 * 128)
    assert footprint(arch).activations == 32 * 32 * 3 + blocks + merges + 2 * 256


@pytest.mark.skipif(not Path("/proc/meminfo").is_file(), reason="Linux reports MemTotal")
def test_machine_memory_is_the_kernels_total():
    line = next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in ln)
    assert machine_memory() == int(line.split()[1]) * 1024


def test_machine_memory_is_none_where_the_os_does_not_say(monkeypatch):
    monkeypatch.delattr(os, "sysconf")
    assert machine_memory() is None
    check_geometry(get_preset("vit", "tiny").arch, 64)  # unchecked rather than refused


def test_every_preset_passes_the_geometry_at_a_batch_of_one():
    for model, names in PRESETS.items():
        for name in names:
            check_geometry(get_preset(model, name).arch, 1, memory=2**40)


def test_a_run_made_with_an_empty_override_still_resumes(tmp_path):
    """Earlier versions took `--recipe ""`: its config.json resumes as if it were left out."""
    options = {f.name: None for f in fields(TrainOptions)}
    options.update(model="shiftvit", preset="tiny", data="shapes:200", recipe="", arch="")
    (tmp_path / "config.json").write_text(json.dumps({"options": options, "preset": {}}))
    resumed = resume_options(tmp_path, {})
    assert resumed.recipe is None and resumed.arch is None
