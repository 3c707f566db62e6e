"""Training-recipe pieces (`TrainRecipe` fields, `toolkit train --recipe`): label smoothing and
the weights' moving average against their formulas, config.json round trips, tiny trainings.
Backend-neutral: tests/test_backends.py runs this module on JAX too."""

from __future__ import annotations

import json
from dataclasses import replace

import keras
import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.data import load_data
from toolkit.errors import UsageError
from toolkit.evaluate import evaluate_model
from toolkit.models import get_preset, preset_from_dict
from toolkit.models.presets import PRESETS, TrainRecipe, parse_recipe, recipe_keys
from toolkit.training.losses import SmoothedCrossentropy
from toolkit.training.train import TrainOptions, compile_model, train


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def test_every_preset_has_the_pieces_off():
    """New fields default off: every preset trains exactly as before."""
    for presets in PRESETS.values():
        for _, recipe in presets.values():
            assert recipe.label_smoothing == 0.0 and recipe.ema is None


def test_label_smoothing_loss_equals_the_formula_for_integer_and_soft_labels():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 5)).astype("float32")
    labels = rng.integers(0, 5, 6)
    eps = 0.1
    smooth = np.eye(5)[labels] * (1 - eps) + eps / 5
    expected = -(smooth * _log_softmax(logits)).sum(axis=1).mean()
    loss = SmoothedCrossentropy(eps)
    np.testing.assert_allclose(float(loss(labels, logits)), expected, rtol=1e-5)
    soft = rng.dirichlet(np.ones(5), 6).astype("float32")  # soft labels pass through unchanged
    expected_soft = -((soft * (1 - eps) + eps / 5) * _log_softmax(logits)).sum(axis=1).mean()
    np.testing.assert_allclose(float(loss(soft, logits)), expected_soft, rtol=1e-5)
    restored = SmoothedCrossentropy.from_config(loss.get_config())
    assert restored.label_smoothing == eps


def test_ema_weights_follow_keras_formula_and_fit_ends_with_them():
    """After each step avg = m * avg + (1 - m) * w (avg = w after the first); fit leaves the
    averages in the weights."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    preset = get_preset("shiftvit", "tiny")
    momentum = 0.8
    preset = replace(preset, train=replace(preset.train, ema=momentum, epochs=1))
    compile_model(model, preset, steps_per_epoch=10, jit=False)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = rng.integers(0, 3, 16)
    average = None
    for _ in range(4):
        model.train_on_batch(x, y)
        raw = [np.array(w) for w in model.trainable_weights]
        average = (
            raw
            if average is None
            else [momentum * a + (1 - momentum) * w for a, w in zip(average, raw, strict=True)]
        )
    stored = [np.array(v) for v in model.optimizer._model_variables_moving_average]
    for got, want, now in zip(stored, average, raw, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert not np.allclose(got, now)  # the average lags the raw weights
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    final = [np.array(v) for v in model.optimizer._model_variables_moving_average]
    for weight, avg in zip(model.trainable_weights, final, strict=True):
        np.testing.assert_array_equal(np.array(weight), avg)


def test_recipe_override_is_typed_by_the_field():
    assert parse_recipe("label_smoothing=0.1,ema=0.999") == {"label_smoothing": 0.1, "ema": 0.999}
    assert parse_recipe("ema=none") == parse_recipe("ema=0") == {"ema": None}
    assert parse_recipe("early_stopping_patience=3") == {"early_stopping_patience": 3}
    assert parse_recipe(None) == {}
    assert "label_smoothing" in recipe_keys() and "augmentation" not in recipe_keys()


@pytest.mark.parametrize(
    "text, words",
    [
        ("smoothing=0.1", "KEY one of"),
        ("label_smoothing", "KEY one of"),
        ("ema=high", "ema=high"),
        ("epochs=3", "--epochs"),
    ],
)
def test_bad_recipe_override_is_one_line(text, words):
    with pytest.raises(UsageError) as error:
        parse_recipe(text)
    assert words in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "text",
    ["label_smoothing=1.0", "label_smoothing=-0.1", "ema=1.5", "warmup_fraction=2"],
)
def test_out_of_range_piece_is_refused_before_training(text, tmp_path):
    with pytest.raises(UsageError, match="pass --recipe"):
        train(TrainOptions("shiftvit", "tiny", "shapes:600", recipe=text), out=tmp_path / "run")


def test_config_without_the_new_fields_still_loads():
    data = get_preset("vit-lsa", "tiny").to_dict()
    for key in ("label_smoothing", "ema"):
        del data["train"][key]
    assert preset_from_dict(data) == get_preset("vit-lsa", "tiny")
    recipe = replace(get_preset("vit-lsa", "tiny").train, label_smoothing=0.1, ema=0.99)
    preset = replace(get_preset("vit-lsa", "tiny"), train=recipe)
    assert preset_from_dict(json.loads(json.dumps(preset.to_dict()))).train == recipe
    assert isinstance(recipe, TrainRecipe)


@pytest.mark.slow
def test_tiny_training_with_label_smoothing_and_ema(tmp_path, capsys):
    """CLI run with the pieces on: recorded in config.json, kept by --resume, model loads."""
    out = tmp_path / "run"
    argv = ["train", "--model", "shiftvit", "--data", "shapes:600", "--epochs", "1"]
    assert main([*argv, "--out", str(out), "--recipe", "label_smoothing=0.1,ema=0.9"]) == 0
    config = json.loads((out / "config.json").read_text())
    recipe = preset_from_dict(config["preset"]).train
    assert (recipe.label_smoothing, recipe.ema) == (0.1, 0.9)
    assert config["options"]["recipe"] == "label_smoothing=0.1,ema=0.9"
    model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    # validation scored the averages, and the saved weights are the final averages: the saved
    # model's top-1 on the validation split is the last epoch's val_accuracy
    data = load_data("shapes:600", seed=0)
    top1 = evaluate_model(model, data.x_val, data.y_val, 64)["top1"]
    history = (out / "history.csv").read_text().splitlines()
    row = dict(zip(history[0].split(","), history[-1].split(","), strict=True))
    assert top1 == pytest.approx(float(row["val_accuracy"]), abs=1e-6)
    (out / "metrics.json").unlink()  # as if unfinished: --resume may not change the recipe
    capsys.readouterr()
    code = main(["train", "--out", str(out), "--resume", "--recipe", "ema=0.5"])
    assert code != 0 and "--resume keeps the run's --recipe" in capsys.readouterr().err
