"""`toolkit train --arch KEY=VALUE`: typed parsing, one-line refusals, docs, the registry."""

import dataclasses
from pathlib import Path

import pytest

from toolkit.common.errors import UsageError
from toolkit.models.architectures import ARCH_CLASSES, ViTArch, check_arch
from toolkit.models.overrides import arch_keys, parse_arch
from toolkit.models.presets import PRESETS, get_preset
from toolkit.ops import LocalitySelfAttention
from toolkit.training.options import TrainOptions
from toolkit.training.train import train


def test_every_model_has_its_architecture_class():
    assert set(ARCH_CLASSES) == set(PRESETS)
    for model, presets in PRESETS.items():
        assert all(type(arch) is ARCH_CLASSES[model] for arch, _ in presets.values())


def test_field_choices_are_the_ones_the_layers_take():
    """`--arch`'s choices for a string field (kept Keras-free so the CLI starts without Keras)
    are the values the layer accepts: a new temperature in the op fails here until the field
    lists it."""
    (field,) = [f for f in dataclasses.fields(ViTArch) if f.name == "lsa_temperature"]
    assert field.metadata["choices"] == LocalitySelfAttention.TEMPERATURES


def test_arch_override_is_typed_by_the_field():
    assert parse_arch("shiftvit", "drop_path=0.2,depths=2:2:6:2") == {
        "drop_path": 0.2,
        "depths": (2, 2, 6, 2),
    }
    assert parse_arch("vit-lsa", "head=class_token,qkv_bias=false,mlp_units=128:64,depth=6") == {
        "head": "class_token",
        "qkv_bias": False,
        "mlp_units": (128, 64),
        "depth": 6,
    }
    assert parse_arch("vit", "head_units=512") == {"head_units": (512,)}
    assert parse_arch("shiftvit", None) == {}
    assert "lsa" not in arch_keys("vit-lsa") and "drop_path" in arch_keys("vit")


@pytest.mark.parametrize(
    "model, text, words",
    [
        ("shiftvit", "droppath=0.2", "KEY one of"),
        ("shiftvit", "depth=6", "KEY one of"),  # the ViT's field, not ShiftViT's
        ("vit-lsa", "lsa=false", "KEY one of"),  # --model decides SPT and LSA
        ("vit-lsa", "head=cls", "flatten or class_token"),
        ("shiftvit", "depths=2:x", "depths=2:x"),
        ("shiftvit", "epochs=3", "--epochs"),
    ],
)
def test_bad_arch_override_is_one_line(model, text, words):
    with pytest.raises(UsageError) as error:
        parse_arch(model, text)
    assert words in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "model, text",
    [
        ("shiftvit", "drop_path=1"),
        ("shiftvit", "dropout=-0.1"),
        ("shiftvit", "depths=2:0"),
        ("shiftvit", "dim=0"),
        ("shiftvit", "num_div=2"),
        ("shiftvit", "mlp_ratio=0"),
        ("vit-lsa", "head_dropout=1.5"),
        ("vit-lsa", "num_heads=0"),
    ],
)
def test_arch_that_cannot_build_is_refused_before_training(model, text, tmp_path):
    with pytest.raises(UsageError, match="pass --arch") as error:
        train(TrainOptions(model, "tiny", "shapes:600", arch=text), out=tmp_path / "run")
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", list(PRESETS))
def test_every_preset_architecture_passes_the_check(model):
    for name in PRESETS[model]:
        check_arch(get_preset(model, name).arch)


@pytest.mark.parametrize("model", list(ARCH_CLASSES))
def test_every_arch_key_is_in_the_docs_table(model):
    """docs/presets.md's 'Architecture fields' names each key `--arch` takes for the model."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "presets.md").read_text()
    section = docs.split("## Architecture fields", 1)[1].split("\n## ", 1)[0]
    documented = set()
    for line in section.splitlines():  # | `key`, `key` | both, or vit, vit-lsa | what | e.g. |
        if line.startswith("| `"):
            keys, models = line.split("|")[1:3]
            if models.strip() == "both" or model in {m.strip() for m in models.split(",")}:
                documented |= {k.strip(" `") for k in keys.split(",")}
    assert set(arch_keys(model)) <= documented
