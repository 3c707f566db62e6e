"""Models, presets, MAC counts and the learning-rate schedule."""

from __future__ import annotations

import dataclasses
import math

import keras
import numpy as np
import pytest
from layer_checks import check_layer

from toolkit.data import Augmentation
from toolkit.models import (
    MODELS,
    PRESETS,
    PositionEmbedding,
    build_model,
    count_macs,
    get_preset,
    preset_from_dict,
)
from toolkit.models.architectures import ShiftViTArch, ViTArch
from toolkit.models.recipes import TrainRecipe
from toolkit.training.schedule import WarmupCosine


def test_seed_presets_keep_the_keras_io_hyperparameters():
    shift = get_preset("shiftvit", "seed")
    assert shift.arch == ShiftViTArch(
        image_size=48, patch_size=4, dim=96, depths=(2, 4, 8, 2), num_div=12, shift_pixel=1,
        mlp_ratio=2.0, epsilon=1e-5, drop_path=0.2, dropout=0.2,
    )  # fmt: skip
    assert shift.train == TrainRecipe(
        batch_size=256, epochs=100, lr_start=1e-5, lr_max=1e-3, weight_decay=1e-4,
        warmup_fraction=0.15, augmentation=Augmentation(flip=True, crop_resize=(52, 48)),
        early_stopping_patience=5,
    )  # fmt: skip
    vit = get_preset("vit-lsa", "seed")
    assert vit.arch == ViTArch(
        image_size=72, patch_size=6, dim=64, depth=8, num_heads=4, key_dim=64,
        mlp_units=(128, 64), dropout=0.1, head_units=(2048, 1024), head_dropout=0.5,
        epsilon=1e-6, spt=True, lsa=True,
    )  # fmt: skip
    assert vit.train == TrainRecipe(
        batch_size=256, epochs=50, lr_start=0.0, lr_max=1e-3, weight_decay=1e-4,
        warmup_fraction=0.10, augmentation=Augmentation(flip=True, rotation=0.02, zoom=0.2),
    )  # fmt: skip
    assert get_preset("vit", "seed").arch.spt is False
    assert get_preset("vit", "seed").arch.lsa is False


@pytest.mark.parametrize("model", list(MODELS))
def test_every_model_tiny_preset_builds_saves_and_reloads(model, tmp_path):
    preset = get_preset(model, "tiny")
    net = build_model(preset, (32, 32, 3), 10)
    assert net.input_shape == (None, 32, 32, 3)
    assert net.output_shape == (None, 10)
    x = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3)).astype("float32")
    path = tmp_path / "model.keras"
    net.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(net.predict(x, verbose=0), loaded.predict(x, verbose=0))
    assert count_macs(net) > 0


@pytest.mark.parametrize("model", list(MODELS))
def test_a_plain_call_is_inference_also_behind_resizing(model, tmp_path):
    """model(x) with no training= must not drop: a Resizing's training default would leak."""
    tiny = get_preset(model, "tiny")
    rates = {"dropout": 0.5}
    rates.update({"drop_path": 0.5} if model == "shiftvit" else {"head_dropout": 0.5})
    preset = dataclasses.replace(tiny, arch=dataclasses.replace(tiny.arch, **rates))
    net = build_model(preset, (20, 20, 3), 10)  # not the preset's size: a Resizing is inside
    assert any(isinstance(layer, keras.layers.Resizing) for layer in net.layers)
    x = np.random.default_rng(0).integers(0, 256, (4, 20, 20, 3)).astype("float32")
    inference = keras.ops.convert_to_numpy(net(x, training=False))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(net(x)), inference)
    assert not np.allclose(keras.ops.convert_to_numpy(net(x, training=True)), inference)
    net.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(x)), inference)


@pytest.mark.parametrize(("model", "name"), [(m, p) for m in PRESETS for p in PRESETS[m]])
def test_every_preset_round_trips_through_its_dict(model, name):
    preset = get_preset(model, name)
    assert preset_from_dict(preset.to_dict()) == preset


def test_seed_models_have_the_expected_size():
    shift = build_model(get_preset("shiftvit", "seed"), (32, 32, 3), 10)
    vit = build_model(get_preset("vit-lsa", "seed"), (32, 32, 3), 100)
    # Width 96, depths (2, 4, 8, 2), MLP ratio 2: the shift has no weights, MLPs hold most.
    assert 11_500_000 < shift.count_params() < 12_000_000
    # The ViT's head (Flatten of 144x64 -> 2048 -> 1024) dominates: about 21.7M in the seed.
    assert 21_000_000 < vit.count_params() < 23_000_000


def test_mac_count_matches_a_hand_count():
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 2, strides=2)(inputs)  # 4*4 outputs * 2*2*3*4
    x = keras.layers.Reshape((16, 4))(x)
    x = keras.layers.Dense(5)(x)  # 16 * 4 * 5
    model = keras.Model(inputs, x)
    assert count_macs(model) == 16 * 2 * 2 * 3 * 4 + 16 * 4 * 5


def test_position_embedding_layer(tmp_path):
    check_layer(PositionEmbedding(), (2, 5, 4), (2, 5, 4), tmp_path)


def _seed_formula(step, lr_start, lr_max, warmup, total):
    if step > total:
        return 0.0
    if step < warmup:
        return lr_start + (lr_max - lr_start) / warmup * step
    return 0.5 * lr_max * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


@pytest.mark.parametrize("step", [0, 1, 14, 15, 16, 50, 99, 100, 101])
def test_warmup_cosine_follows_the_seed_formula(step):
    schedule = WarmupCosine(lr_start=1e-5, lr_max=1e-3, warmup_steps=15, total_steps=100)
    expected = _seed_formula(step, 1e-5, 1e-3, 15, 100)
    assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-9)


def test_warmup_cosine_serializes():
    schedule = WarmupCosine(lr_start=0.0, lr_max=1e-3, warmup_steps=10, total_steps=100)
    config = keras.saving.serialize_keras_object(schedule)
    again = keras.saving.deserialize_keras_object(config, safe_mode=True)
    assert again.get_config() == schedule.get_config()


def test_shipped_preset_counts_are_the_built_ones():
    """preset_counts.json (what `toolkit presets` prints without building) equals building every
    preset at its workload now, fingerprints included."""
    from toolkit.models.counts import shipped_counts
    from toolkit.models.table import counts_table

    assert shipped_counts() == counts_table(), (
        "toolkit/models/preset_counts.json is stale: run `python -m toolkit.models.table`"
    )


def test_a_stale_shipped_count_is_built_again(monkeypatch):
    """A shipped row whose architecture changed since (another fingerprint) is not used."""
    from toolkit.models import counts

    preset = get_preset("vit", "tiny")
    key = counts.count_key(preset, (32, 32, 3), 10)
    real = counts.shipped_counts()[key]
    fake = {key: {**real, "params": 1, "macs": 2}}
    monkeypatch.setattr(counts, "shipped_counts", lambda: fake)
    assert counts.preset_counts(preset, (32, 32, 3), 10) == (1, 2)
    fake[key]["fingerprint"] = "0" * 16
    assert counts.preset_counts(preset, (32, 32, 3), 10) == (real["params"], real["macs"])


def test_docs_presets_tables_are_the_generated_ones():
    from toolkit.models.table import DOC, doc_blocks, with_blocks

    text = DOC.read_text()
    assert text == with_blocks(text, doc_blocks()), (
        "docs/presets.md's tables are stale: run `python -m toolkit.models.table`"
    )
    small = text.split("<!-- presets:begin -->\n", 1)[1].split("<!-- presets:end -->", 1)[0]
    assert "| shiftvit | seed |" in small and "| 103.9 M |" in small
    assert "shift-b" not in small  # ImageNet presets: in their own table, at 224x224
    paper = text.split("<!-- paper-presets:begin -->\n", 1)[1]
    assert "| shiftvit | shift-b | Shift-B |" in paper and "| 89,026,152 | 89 M |" in paper


def test_doc_blocks_replace_only_between_their_markers():
    from toolkit.models.table import with_blocks

    text = "intro\n<!-- a:begin -->\nold\n<!-- a:end -->\nrest\n"
    assert with_blocks(text, {"a": "new\n"}) == (
        "intro\n<!-- a:begin -->\nnew\n<!-- a:end -->\nrest\n"
    )
    with pytest.raises(ValueError, match="no <!-- b:begin -->"):
        with_blocks(text, {"b": "x\n"})


def test_every_preset_name_says_what_it_is_for():
    from toolkit.models.presets import PRESET_PURPOSES

    assert {name for presets in PRESETS.values() for name in presets} == set(PRESET_PURPOSES)
