"""Training-recipe pieces (`TrainRecipe` fields, `toolkit train --recipe`): label smoothing and
the weights' moving average against their formulas, config.json round trips, tiny trainings.
Backend-neutral: tests/test_backends.py runs this module on JAX too."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data import eval_dataset, load_data, train_dataset
from toolkit.data.augment import Augmentation
from toolkit.data.input_pipeline import augments_in_pipeline
from toolkit.data.mixing import Mixing, choose, cutmix, mix_batch, mixup
from toolkit.data.random_augment import RandomAugment
from toolkit.evaluate import evaluate_model
from toolkit.models import get_preset, preset_from_dict
from toolkit.models.overrides import parse_recipe
from toolkit.models.presets import PRESETS
from toolkit.models.recipes import TrainRecipe, recipe_keys, with_recipe
from toolkit.training.losses import HardAccuracy, HardTopKAccuracy, SmoothedCrossentropy
from toolkit.training.options import TrainOptions
from toolkit.training.train import compile_model, train


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


# presets tuned with a piece on: (model, preset) -> its label smoothing
_SMOOTHED = {(m, p): 0.1 for m in ("vit-lsa", "vit") for p in ("cpu60", "cpu15")}
# presets that hold out less than the data's own validation split: (model, preset) -> share
_HELD_OUT = {(m, "cpu15"): 0.04 for m in PRESETS} | {("shiftvit", "cpu60"): 0.04}
# presets that train progressively resized: (model, preset) -> (START, UNTIL)
_RAMPED = {("shiftvit", "cpu60"): (16, 0.5), ("shiftvit", "cpu15"): (16, 0.5)}


def test_every_preset_has_the_pieces_off():
    """New fields default off: every preset trains exactly as before (but `paper-cifar`, made
    with them: the SPT/LSA paper's recipe, tests/test_paper_cifar.py; the ViT `cpu60`,
    re-tuned with label smoothing; the ShiftViT `cpu60`, with a smaller validation split and
    progressive resizing; the `cpu15` presets, made from them)."""
    for model, presets in PRESETS.items():
        for name, (_, recipe) in presets.items():
            if name == "paper-cifar":
                continue
            assert recipe.label_smoothing == _SMOOTHED.get((model, name), 0.0)
            assert recipe.val_fraction == _HELD_OUT.get((model, name))
            assert recipe.progressive_resize == _RAMPED.get((model, name))
            assert recipe.ema is None
            assert recipe.mixup == 0.0 and recipe.cutmix == 0.0 and recipe.mix_prob == 1.0
            assert recipe.rand_augment is None and recipe.repeat_augment == 1
            assert recipe.cutmix_alpha == "uniform" and recipe.augmentation.auto_augment is None
            assert recipe.augmentation.erasing_fill == "noise"


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


@pytest.mark.parametrize("key", recipe_keys())
def test_every_recipe_key_is_in_the_docs_table(key):
    """docs/presets.md's 'Recipe pieces' names each key `--recipe` takes (`toolkit train
    --help` points there)."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "presets.md").read_text()
    section = docs.split("## Recipe pieces", 1)[1].split("\n## ", 1)[0]
    assert f"`{key}`" in section


def test_recipe_override_is_typed_by_the_field():
    assert parse_recipe("label_smoothing=0.1,ema=0.999") == {"label_smoothing": 0.1, "ema": 0.999}
    assert parse_recipe("ema=none") == parse_recipe("ema=0") == {"ema": None}
    assert parse_recipe("early_stopping_patience=3") == {"early_stopping_patience": 3}
    assert parse_recipe(None) == {}
    assert parse_recipe("rand_augment=2:0.9,mixup=0.8") == {"rand_augment": (2, 0.9), "mixup": 0.8}
    assert parse_recipe("rand_augment=none") == {"rand_augment": None}
    assert parse_recipe("val_fraction=0.04") == {"val_fraction": 0.04}
    assert parse_recipe("val_fraction=none") == {"val_fraction": None}  # the data's own split
    assert "label_smoothing" in recipe_keys() and "augmentation" not in recipe_keys()
    # the augmentation's fields, typed by Augmentation's
    augment = parse_recipe("erasing=0.5,crop_resize=40:32,flip=off,rotation=0.05")
    assert augment == {"erasing": 0.5, "crop_resize": (40, 32), "flip": False, "rotation": 0.05}
    assert parse_recipe("crop_resize=none") == {"crop_resize": None}
    assert parse_recipe("crop_resize=none,pad_crop=4") == {"crop_resize": None, "pad_crop": 4}


def test_with_recipe_sets_augmentation_fields_inside_the_augmentation():
    recipe = get_preset("shiftvit", "cpu60").train
    changed = with_recipe(recipe, parse_recipe("erasing=0.5,label_smoothing=0.1"))
    assert changed.augmentation == replace(recipe.augmentation, erasing=0.5)
    assert changed == replace(recipe, label_smoothing=0.1, augmentation=changed.augmentation)
    assert with_recipe(recipe, {}) == recipe


@pytest.mark.parametrize(
    "text, words",
    [
        ("smoothing=0.1", "KEY one of"),
        ("label_smoothing", "KEY one of"),
        ("ema=high", "ema=high"),
        ("epochs=3", "--epochs"),
        ("rand_augment=2", "rand_augment=2"),
    ],
)
def test_bad_recipe_override_is_one_line(text, words):
    with pytest.raises(UsageError) as error:
        parse_recipe(text)
    assert words in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "text",
    [
        "label_smoothing=1.0",
        "label_smoothing=-0.1",
        "ema=1.5",
        "warmup_fraction=2",
        "mixup=-1",
        "cutmix=1.5",
        "mix_prob=2",
        "rand_augment=0:0.5",
        "rand_augment=2:1.5",
        "repeat_augment=-1",
        "val_fraction=1",
        "val_fraction=-0.1",
        "erasing=1.5",
        "rotation=-0.1",
        "zoom=-0.2",
        "zoom=5",  # Keras' factor: 1 or more draws negative scales
        "crop_resize=30:32",
        "pad_crop=-2",
        "crop_resize=36:32,pad_crop=4",  # one crop at a time
    ],
)
def test_out_of_range_piece_is_refused_before_training(text, tmp_path):
    with pytest.raises(UsageError, match="pass --recipe"):
        train(TrainOptions("shiftvit", "tiny", "shapes:600", recipe=text), out=tmp_path / "run")


@pytest.mark.parametrize("off", ["0", "none", "off", "1"])
def test_repeat_augment_off_is_each_image_once(off):
    recipe = with_recipe(
        get_preset("shiftvit", "tiny").train, parse_recipe(f"repeat_augment={off}")
    )
    assert recipe.repeat_augment == 1


def test_config_without_the_new_fields_still_loads():
    data = get_preset("vit-lsa", "tiny").to_dict()
    for key in (
        "label_smoothing",
        "ema",
        "mixup",
        "cutmix",
        "mix_prob",
        "rand_augment",
        "repeat_augment",
        "val_fraction",
    ):
        del data["train"][key]
    del data["train"]["augmentation"]["pad_crop"]
    assert preset_from_dict(data) == get_preset("vit-lsa", "tiny")
    recipe = replace(
        get_preset("vit-lsa", "tiny").train,
        label_smoothing=0.1,
        ema=0.99,
        mixup=0.8,
        cutmix=1.0,
        mix_prob=0.5,
        rand_augment=(2, 0.9),
        repeat_augment=3,
    )
    recipe = replace(recipe, augmentation=replace(recipe.augmentation, pad_crop=4))
    preset = replace(get_preset("vit-lsa", "tiny"), train=recipe)
    assert preset_from_dict(json.loads(json.dumps(preset.to_dict()))).train == recipe
    assert isinstance(recipe, TrainRecipe)


@pytest.mark.slow
def test_tiny_training_with_label_smoothing_ema_and_an_arch_override(tmp_path, capsys):
    """CLI run with the pieces on and stochastic depth + depths over the preset's: recorded in
    config.json, kept by --resume, the saved model has the overridden blocks and loads."""
    out = tmp_path / "run"
    argv = ["train", "--model", "shiftvit", "--data", "shapes:600", "--epochs", "1"]
    recipe = "label_smoothing=0.1,ema=0.9,erasing=0.5"
    pieces = ["--recipe", recipe, "--arch", "drop_path=0.2,depths=1:2"]
    assert main([*argv, "--out", str(out), *pieces]) == 0
    config = json.loads((out / "config.json").read_text())
    preset = preset_from_dict(config["preset"])
    assert (preset.train.label_smoothing, preset.train.ema) == (0.1, 0.9)
    shiftvit_tiny = get_preset("shiftvit", "tiny").train.augmentation
    assert preset.train.augmentation == replace(shiftvit_tiny, erasing=0.5)
    assert (preset.arch.drop_path, preset.arch.depths) == (0.2, (1, 2))
    assert config["options"]["recipe"] == recipe
    assert config["options"]["arch"] == "drop_path=0.2,depths=1:2"
    model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    blocks = {layer.name.rsplit("_shift", 1)[0] for layer in model.layers if "_shift" in layer.name}
    assert blocks == {"stage0_block0", "stage1_block0", "stage1_block1"}
    rates = [layer.rate for layer in model.layers if "drop_path" in layer.name]
    assert rates == pytest.approx([0.1, 0.2])  # rising linearly over the blocks, the first 0
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
    code = main(["train", "--out", str(out), "--resume", "--arch", "drop_path=0.1"])
    assert code != 0 and "--resume keeps the run's --arch" in capsys.readouterr().err


def _images(n: int = 6) -> np.ndarray:
    return np.random.default_rng(1).uniform(0, 255, (n, 8, 10, 3)).astype(np.float32)


def test_numpy_mixup_blends_images_and_labels_by_the_same_beta_weight():
    images, onehot = _images(), np.eye(6, dtype=np.float32)  # image i is class i
    mixed, labels = mixup(images, onehot, 0.8, np.random.default_rng(5))
    rng = np.random.default_rng(5)  # the same draws, by the formula
    partner = rng.permutation(6)
    weight = rng.beta(0.8, 0.8, 6).astype(np.float32)
    expected = (
        weight[:, None, None, None] * images + (1 - weight[:, None, None, None]) * (images[partner])
    )
    np.testing.assert_allclose(mixed, expected, rtol=1e-6)
    np.testing.assert_allclose(labels.sum(axis=1), 1.0, rtol=1e-6)
    want = weight[:, None] * onehot + (1 - weight[:, None]) * onehot[partner]
    np.testing.assert_allclose(labels, want, rtol=1e-6)


def test_numpy_cutmix_labels_are_the_shares_of_pixels_kept_and_pasted():
    images, onehot = _images(), np.eye(6, dtype=np.float32)
    mixed, labels = cutmix(images, onehot, 1.0, np.random.default_rng(7))
    np.testing.assert_allclose(labels.sum(axis=1), 1.0, rtol=1e-6)
    pasted = 0
    for i in range(6):
        own = np.all(mixed[i] == images[i], axis=-1)
        partner = [j for j in range(6) if j != i and labels[i, j] > 0]
        if not partner:  # nothing pasted (or its own image drawn as partner)
            assert labels[i, i] == pytest.approx(1.0)
            continue
        (j,) = partner
        other = np.all(mixed[i] == images[j], axis=-1)
        assert np.all(own | other)  # every pixel is its own or the partner's
        rows, cols = np.nonzero(other)  # the pasted pixels make one box
        assert other[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1].all()
        assert labels[i, i] == pytest.approx(own.mean(), abs=1e-6)
        assert labels[i, j] == pytest.approx(other.mean(), abs=1e-6)
        pasted += 1
    assert pasted > 0


def test_one_of_mixup_and_cutmix_per_mixed_batch_half_each():
    both = Mixing(mixup=0.8, cutmix=1.0, prob=0.5, num_classes=3)
    draws = np.random.default_rng(0).uniform(size=(4000, 2))
    picks = [choose(both, a, b) for a, b in draws]
    for name, share in (("mixup", 0.25), ("cutmix", 0.25), (None, 0.5)):
        assert picks.count(name) / len(picks) == pytest.approx(share, abs=0.03)
    assert choose(Mixing(cutmix=1.0, num_classes=3), 0.99, 0.0) == "cutmix"
    assert choose(Mixing(num_classes=3), 0.0, 0.0) is None
    rare = Mixing(mixup=0.8, prob=1e-9, num_classes=6)  # not mixed: one-hot labels
    images, labels = mix_batch(_images(), np.arange(6), rare, np.random.default_rng(0))
    np.testing.assert_array_equal(images, _images())
    np.testing.assert_array_equal(labels, np.eye(6))


def test_hard_metrics_score_soft_labels_by_their_largest_class():
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0]], np.float32)
    soft = np.array([[0.7, 0.3, 0.0], [0.6, 0.4, 0.0], [0.0, 0.2, 0.8]], np.float32)
    metric = HardAccuracy()
    metric.update_state(soft, logits)
    assert float(metric.result()) == pytest.approx(2 / 3)
    metric = HardAccuracy()
    metric.update_state(np.array([0, 1, 1]), logits)  # integer labels: validation
    assert float(metric.result()) == pytest.approx(2 / 3)
    top = HardTopKAccuracy(2)
    top.update_state(soft, logits)
    assert float(top.result()) == pytest.approx(2 / 3)


def _first_batch(dataset) -> tuple[np.ndarray, ...]:
    if isinstance(dataset, keras.utils.PyDataset):
        return tuple(np.asarray(a) for a in dataset[0])
    return tuple(np.asarray(a) for a in next(iter(dataset)))


def test_pipeline_mixes_training_batches_only_seeded():
    """Training batches carry soft labels (rows summing to 1, some mixed), the same for the
    same seed; validation batches keep the integer labels."""
    data = load_data("shapes:600", seed=0)
    mix = Mixing(mixup=0.8, cutmix=1.0, prob=1.0, num_classes=data.num_classes)
    aug = Augmentation(flip=True)
    images, labels = _first_batch(train_dataset(data.x_train, data.y_train, 64, aug, 3, mix))
    assert labels.shape == (64, data.num_classes) and images.shape[0] == 64
    np.testing.assert_allclose(labels.sum(axis=1), 1.0, rtol=1e-5)
    assert (labels.max(axis=1) < 1.0 - 1e-6).any()  # mixed
    again = _first_batch(train_dataset(data.x_train, data.y_train, 64, aug, 3, mix))
    np.testing.assert_array_equal(labels, again[1])
    np.testing.assert_array_equal(images, again[0])
    _, plain = _first_batch(eval_dataset(data.x_val, data.y_val, 64))
    assert plain.ndim == 1 and np.array_equal(plain, data.y_val[:64])


@pytest.mark.slow
def test_tiny_training_with_mixup_cutmix_and_smoothing(tmp_path):
    """Both mixes on half the batches: trains, recorded; validation scored on plain labels (the
    saved model's top-1 on the validation split is the last val_accuracy)."""
    pieces = "mixup=0.8,cutmix=1,mix_prob=0.5,label_smoothing=0.1"
    options = TrainOptions("vit-lsa", "tiny", "shapes:600", epochs=1, recipe=pieces)
    out = train(options, out=tmp_path / "run")
    recipe = preset_from_dict(json.loads((out / "config.json").read_text())["preset"]).train
    assert (recipe.mixup, recipe.cutmix, recipe.mix_prob) == (0.8, 1.0, 0.5)
    model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    data = load_data("shapes:600", seed=0)
    top1 = evaluate_model(model, data.x_val, data.y_val, 64)["top1"]
    history = (out / "history.csv").read_text().splitlines()
    row = dict(zip(history[0].split(","), history[-1].split(","), strict=True))
    assert top1 == pytest.approx(float(row["val_accuracy"]), abs=1e-6)
    assert np.isfinite(float(row["loss"]))


def test_in_step_rand_augment_is_keras_rand_augment():
    """The RandomAugment layer (JAX's in-step augmentation) runs keras.layers.RandAugment:
    the same images as the Keras layer with the same seed; identity at inference."""
    x = np.random.default_rng(2).uniform(0, 255, (4, 16, 16, 3)).astype(np.float32)
    layer = RandomAugment(rand_augment=(2, 0.9), seed=3)
    reference = keras.layers.RandAugment(value_range=(0, 255), num_ops=2, factor=0.9, seed=3)
    got = np.asarray(layer(x, training=True))
    want = np.clip(np.asarray(reference(x, training=True)), 0, 255)
    np.testing.assert_allclose(got, want, atol=1e-3)
    assert not np.allclose(got, x)
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), x)
    assert RandomAugment.from_config(layer.get_config()).rand_augment == (2, 0.9)


def test_pipeline_rand_augments_training_batches_seeded():
    """On TensorFlow tf.data runs RandAugment (the same batches for the same seed); elsewhere
    the batches are plain and the step augments (the test above)."""
    data = load_data("shapes:600", seed=0)
    aug = Augmentation()
    plain = _first_batch(train_dataset(data.x_train, data.y_train, 32, aug, 4))
    first = _first_batch(train_dataset(data.x_train, data.y_train, 32, aug, 4, None, (2, 0.9)))
    again = _first_batch(train_dataset(data.x_train, data.y_train, 32, aug, 4, None, (2, 0.9)))
    np.testing.assert_array_equal(first[1], plain[1])
    np.testing.assert_array_equal(first[0], again[0])
    assert (not np.array_equal(first[0], plain[0])) == augments_in_pipeline(data.x_train)
    assert first[0].min() >= 0 and first[0].max() <= 255


@pytest.mark.slow
def test_tiny_training_with_rand_augment_and_repeated_augmentation(tmp_path):
    """RandAugment on (tf.data on TensorFlow, in the compiled step on JAX) over batches of
    repeated images (the two stages compose: the order's copies, then each copy's draws, tests
    above): trains, recorded."""
    pieces = "rand_augment=2:0.5,repeat_augment=3"
    options = TrainOptions("shiftvit", "tiny", "shapes:600", epochs=1, recipe=pieces)
    out = train(options, out=tmp_path / "run")
    config = json.loads((out / "config.json").read_text())
    recipe = preset_from_dict(config["preset"]).train
    assert (recipe.rand_augment, recipe.repeat_augment) == ((2, 0.5), 3)
    keras.saving.load_model(out / "model.keras", safe_mode=True)
    assert np.isfinite(json.loads((out / "metrics.json").read_text())["test_top1"])


def _epoch(dataset) -> list[tuple[np.ndarray, ...]]:
    if isinstance(dataset, keras.utils.PyDataset):
        return [tuple(np.asarray(a) for a in dataset[i]) for i in range(len(dataset))]
    return [tuple(np.asarray(a) for a in batch) for batch in dataset]


def test_repeated_augmentation_draws_each_image_n_times_an_epoch_of_the_same_size():
    """DeiT's RASampler on one device: 1/3 of the images, each 3 times in a row; the epoch's
    count unchanged; another draw the next epoch; unaugmented copies equal."""
    n = 60
    x = np.broadcast_to(np.arange(n, dtype=np.uint8)[:, None, None, None], (n, 4, 4, 3)).copy()
    y = np.arange(n) % 3
    dataset = train_dataset(x, y, 12, Augmentation(), 5, None, None, 3)
    seen = []
    for epoch in range(2):
        if isinstance(dataset, keras.utils.PyDataset) and epoch:
            dataset.on_epoch_end()
        ids = np.concatenate([images[:, 0, 0, 0] for images, _ in _epoch(dataset)]).astype(int)
        assert len(ids) == n
        assert (ids.reshape(-1, 3) == ids[::3, None]).all()  # copies in a row
        assert len(set(ids)) == n // 3
        seen.append(set(ids))
    assert seen[0] != seen[1]


def test_repeated_copies_are_augmented_differently():
    """Copies of an image in a batch get their own draws (tf.data here; the in-step layer
    draws per image on JAX)."""
    data = load_data("shapes:600", seed=0)
    aug = Augmentation(flip=True, crop_resize=(40, 32), rotation=0.05)
    if not augments_in_pipeline(data.x_train):
        images = RandomAugment.of(aug, seed=1)(np.repeat(data.x_train[:4], 2, 0), training=True)
    else:
        images = _first_batch(train_dataset(data.x_train, data.y_train, 8, aug, 1, None, None, 2))[
            0
        ]
    images = np.asarray(images)
    assert not any(np.allclose(images[i], images[i + 1]) for i in range(0, 8, 2))
