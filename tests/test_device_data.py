"""Device-resident training (toolkit.training.device_data): the in-step Mixup/CutMix against
its NumPy reference, the index batches against the host pipeline's order, checkpoints without
the uploaded split, and `toolkit train --device-data` end to end."""

from __future__ import annotations

import json
from dataclasses import fields

import keras
import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data.array_pipeline import ArrayBatches
from toolkit.data.mix_ops import (
    CUTMIX,
    CUTMIX_ALPHA_DRAWS,
    MIXUP,
    NONE,
    MixDraws,
    apply_mix,
    draw_mix,
    reference_mix,
)
from toolkit.data.mixing import CUTMIX_ALPHAS, Mixing
from toolkit.training.checkpoint import load_state, save_state
from toolkit.training.device_data import (
    DeviceResidentTrainer,
    IndexBatches,
    stored,
    use_device_data,
)
from toolkit.training.options import resume_options


def _draws(which: int, batch: int, seed: int = 0) -> MixDraws:
    rng = np.random.default_rng(seed)
    return MixDraws(
        which=np.int32(which),
        partner=rng.permutation(batch).astype(np.int32),
        weight=rng.beta(0.8, 0.8, batch).astype(np.float32),
        keep=rng.beta(1.0, 1.0, batch).astype(np.float32),
        corner=rng.uniform(0, 1, (batch, 2)).astype(np.float32),
    )


@pytest.mark.parametrize("which", [NONE, MIXUP, CUTMIX])
def test_in_step_mix_matches_the_numpy_reference(which):
    rng = np.random.default_rng(1)
    images = rng.uniform(0, 255, (6, 12, 10, 3)).astype(np.float32)
    onehot = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 6)]
    draws = _draws(which, 6)
    mixed, labels = apply_mix(images, onehot, draws)
    want_images, want_labels = reference_mix(images, onehot, draws)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(mixed), want_images, atol=1e-3)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(labels), want_labels, atol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(labels).sum(axis=1), 1.0, atol=1e-6)
    if which == CUTMIX:  # each image shows some of its partner's pixels, unchanged
        assert not np.allclose(want_images, images)


def _drawer(mix: Mixing, batch: int, seed: keras.random.SeedGenerator):
    """() -> the next batch's `draw_mix` draws as NumPy, `seed` advanced. On JAX one compiled
    draw, as the train step makes it (eagerly each of its ops dispatches on its own: 400 draws
    took twice the CPU time); eager elsewhere."""
    names = [f.name for f in fields(MixDraws)]
    if keras.backend.backend() != "jax":

        def draw() -> MixDraws:
            return draw_mix(mix, batch, seed)

    else:
        import jax

        def one(state):
            with keras.StatelessScope(state_mapping=[(seed.state, state)]) as scope:
                draws = draw_mix(mix, batch, seed)
            return [getattr(draws, n) for n in names], scope.get_current_value(seed.state)

        compiled = jax.jit(one)

        def draw() -> MixDraws:
            values, state = compiled(seed.state.value)
            seed.state.assign(state)
            return MixDraws(*values)

    def next_draws() -> MixDraws:
        draws = draw()
        return MixDraws(*[keras.ops.convert_to_numpy(getattr(draws, n)) for n in names])

    return next_draws


def test_drawn_mixes_follow_the_recipe():
    """Over many batches: mixed with probability `prob`, half Mixup half CutMix, partners a
    permutation, Mixup weights Beta(alpha, alpha) (mean 1/2, variance 1 / (4 (2 alpha + 1)))."""
    seed = keras.random.SeedGenerator(3)
    mix = Mixing(mixup=0.8, cutmix=1.0, prob=0.5, num_classes=10)
    draw = _drawer(mix, 16, seed)
    kinds, weights = [], []
    for _ in range(400):
        draws = draw()
        kinds.append(int(draws.which))
        assert sorted(draws.partner.tolist()) == list(range(16))
        weights.append(draws.weight)
    kinds = np.array(kinds)
    assert abs((kinds == NONE).mean() - 0.5) < 0.08
    assert abs((kinds == MIXUP).mean() - 0.25) < 0.07
    weights = np.concatenate(weights)
    assert abs(weights.mean() - 0.5) < 0.02
    assert abs(weights.var() - 1 / (4 * (2 * 0.8 + 1))) < 0.01


def test_the_step_knows_every_cutmix_alpha_rule_the_host_pipeline_does():
    assert set(CUTMIX_ALPHA_DRAWS) == set(CUTMIX_ALPHAS)


def test_fixed_cutmix_alpha_draws_the_kept_share_from_beta_1_1():
    """cutmix_alpha="fixed", cutmix=1 (the SPT/LSA paper's code): lambda ~ Beta(1, 1) = U(0, 1),
    mean 1/2, variance 1/12."""
    seed = keras.random.SeedGenerator(5)
    mix = Mixing(cutmix=1.0, num_classes=10, cutmix_alpha="fixed")
    draw = _drawer(mix, 64, seed)
    keep = np.concatenate([draw().keep for _ in range(100)])
    assert abs(keep.mean() - 0.5) < 0.02 and abs(keep.var() - 1 / 12) < 0.01


def test_index_batches_draw_the_host_pipelines_order():
    x = np.zeros((50, 2, 2, 3), np.uint8)
    y = np.arange(50)
    host = ArrayBatches(x, y, 16, shuffle_seed=7)
    device = IndexBatches(50, 16, seed=7, remainder=False)
    for _ in range(2):  # two epochs: a new order each
        assert len(device) == len(host) == 3
        assert np.array_equal(device.order, host.order)
        assert device[0][0].dtype == np.int32
        host.on_epoch_end()
        device.on_epoch_end()


def _trainer(mix: Mixing | None = None) -> DeviceResidentTrainer:
    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(inputs)))
    images = np.random.default_rng(0).integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)
    return DeviceResidentTrainer(model, images, np.arange(20) % 3, 3, mix=mix)


def test_the_step_gathers_the_indexed_images_and_labels():
    trainer = _trainer()
    indices = np.array([4, 0, 19], np.int32)
    out = trainer(indices, training=False)
    images = keras.ops.convert_to_numpy(trainer.images)[indices].astype(np.float32)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out["logits"]),
        keras.ops.convert_to_numpy(trainer.model(images)),
        rtol=1e-5,
        atol=1e-4,
    )
    assert keras.ops.convert_to_numpy(out["targets"]).tolist() == [1, 0, 1]
    # float images (validation) go straight to the model
    assert keras.ops.convert_to_numpy(trainer(images)).shape == (3, 3)


def test_checkpoints_leave_the_uploaded_split_out(tmp_path):
    trainer = _trainer(Mixing(mixup=0.5, num_classes=3))
    trainer.compile(optimizer="adam", loss="categorical_crossentropy")
    batches = IndexBatches(20, 4, seed=0)
    trainer.fit(batches, epochs=1, verbose=0)
    names = [v.name for v in trainer.weights if stored(v)]
    assert names == ["device_images", "device_labels"]
    save_state(tmp_path / "state.npz", trainer, 1)
    with np.load(tmp_path / "state.npz") as saved:
        sizes = [saved[name].size for name in saved.files]
    assert max(sizes) < 20 * 8 * 8 * 3  # no array the size of the split
    fresh = _trainer(Mixing(mixup=0.5, num_classes=3))
    fresh.compile(optimizer="adam", loss="categorical_crossentropy")
    fresh.fit(IndexBatches(20, 4, seed=0), epochs=1, verbose=0)
    assert load_state(tmp_path, fresh) == 1
    for a, b in zip(trainer.model.weights, fresh.model.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))


def test_device_data_modes():
    x = np.zeros((4, 2, 2, 3), np.uint8)
    assert use_device_data("off", x) is False
    assert use_device_data("on", x) is True
    assert use_device_data("auto", x) is False  # no accelerator here: the host pipeline
    with pytest.raises(UsageError, match="--device-data on needs"):
        use_device_data("on", x, replicas=2)


def test_unknown_device_data_mode_is_refused_in_one_line(tmp_path, capsys):
    argv = ["train", "--model", "shiftvit", "--data", "shapes:200", "--device-data", "gpu"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--device-data: invalid choice: 'gpu'" in err and "\n" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_resume_keeps_the_runs_input_path_unless_told_otherwise(tmp_path, capsys):
    """config.json records the path `auto` chose; a resume that names none keeps it, one that
    names another is refused (the checkpoint holds the other path's state)."""
    out = tmp_path / "run"
    argv = ["train", "--model", "shiftvit", "--data", "shapes:200", "--epochs", "1"]
    assert main([*argv, "--device-data", "on", "--out", str(out)]) == 0
    (out / "metrics.json").unlink()  # unfinished again: its checkpoint is gone, it starts anew
    options = resume_options(out, {"epochs": 2, "device_data": None})
    assert options.device_data == "on" and options.epochs == 2
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume", "--device-data", "off"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--resume keeps the run's --device-data on" in err and "\n" not in err


@pytest.mark.slow
@pytest.mark.skipif(
    keras.backend.backend() == "tensorflow",
    reason="learning is compared on JAX, the GPU training backend (test_backends re-runs this "
    "file there); on TensorFlow the device path's batches are checked equal to the host's above",
)
def test_a_device_resident_run_learns_as_the_host_fed_one(tmp_path):
    """The same tiny recipe and seed budget both ways (12 epochs of shapes:600, augmentation
    and Mixup/CutMix): each learns, the device-resident run no worse than the host-fed one
    beyond noise; config.json records the mode."""
    scores = {}
    for mode in ("on", "off"):
        out = tmp_path / mode
        argv = ["train", "--model", "shiftvit", "--data", "shapes:600", "--epochs", "12"]
        recipe = ["--recipe", "mixup=0.8,cutmix=1,mix_prob=0.5,erasing=0.25"]
        assert main([*argv, *recipe, "--device-data", mode, "--out", str(out)]) == 0
        config = json.loads((out / "config.json").read_text())
        assert config["options"]["device_data"] == mode
        scores[mode] = json.loads((out / "metrics.json").read_text())["test_top1"]
    assert min(scores.values()) > 0.3, scores  # chance: 0.1
    # not worse than the host-fed run beyond the spread of such tiny runs (seen: on - off from
    # -0.02 to +0.33 over seeds and backends; the test split is 60 images)
    assert scores["on"] >= scores["off"] - 0.2, scores
