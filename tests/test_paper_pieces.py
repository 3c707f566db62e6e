"""The SPT/LSA paper's recipe pieces as its code has them: AutoAugment's CIFAR-10 policy
(keras.ops against the NumPy reference, the reference against Pillow, which the code runs),
random erasing filled with the mean pixel, CutMix with alpha fixed (Beta(1, 1)), and the
`paper-cifar` recipe that uses them. Backend-neutral but for the tf.data tests (TensorFlow);
tests/test_backends.py runs this module on JAX too."""

from __future__ import annotations

import json
from dataclasses import replace

import keras
import numpy as np
import pytest
from backend_calls import augmented

from toolkit.common.errors import UsageError
from toolkit.data import erasing
from toolkit.data.augment import Augmentation
from toolkit.data.autoaugment import apply_ops, auto_augment
from toolkit.data.autoaugment_policies import CIFAR10, DRAWS, OP_IDS, OPS, POLICIES
from toolkit.data.autoaugment_reference import reference_auto_augment, reference_op
from toolkit.data.mixing import Mixing, cutmix, mix_batch
from toolkit.data.random_augment import RandomAugment
from toolkit.models import get_preset, preset_from_dict
from toolkit.models.overrides import parse_recipe
from toolkit.models.recipes import check_recipe, with_recipe

on_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the tf.data pipeline is TensorFlow's"
)
# ops whose float32 source coordinates can round apart from the reference's doubles where a
# coordinate falls exactly on a tap or the image's edge: the share of pixels that may differ
SHEARS = {"shearX", "shearY"}


def _np(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


def _compiled(fn, static: tuple[int, ...] = ()):
    """`fn` compiled whole on JAX, as its train step runs the policy (eager JAX compiles each of
    the policy's hundreds of ops on its own for every batch shape: 4 times the time of one
    compile); as it is on the other backends. `static`: the positions of its non-array args."""
    if keras.backend.backend() != "jax":
        return fn
    import jax

    return jax.jit(fn, static_argnums=static)


_apply_ops = _compiled(apply_ops)
_auto_augment = _compiled(auto_augment, static=(2,))  # the policy's name


def _images(n: int, seed: int, size: int = 32) -> np.ndarray:
    """Whole-number RGB images 0-255: a third full-range noise, a third low-contrast noise
    (the histogram ops then stretch), a third smooth ramps."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 256, (n, size, size, 3)).astype(np.float32)
    out[1::3] = rng.integers(60, 140, (len(out[1::3]), size, size, 3))
    ramp = np.linspace(0, 1, size)[None, None, :, None] * rng.integers(40, 256, (n, 1, 1, 3))
    out[2::3] = np.round(ramp + rng.integers(0, 16, (n, size, size, 3)))[2::3]
    return np.clip(out, 0, 255)


def _values(op_name: str) -> list[float]:
    """The op's value at every magnitude 0-9 and both signs (`Op.value`)."""
    op = OPS[OP_IDS[op_name]]
    return [op.value(m, negative) for negative in (False, True) for m in range(10)]


# --- the policy as the paper's code lists it --------------------------------------------------


def test_cifar10_policy_is_the_codes_25_sub_policies_and_scales():
    assert len(CIFAR10) == 25 and POLICIES["cifar10"] is CIFAR10
    assert CIFAR10[0] == ((0.1, "invert", 7), (0.2, "contrast", 6))
    assert CIFAR10[3] == ((0.5, "shearY", 8), (0.7, "translateY", 9))
    assert CIFAR10[-1] == ((0.7, "translateY", 9), (0.9, "autocontrast", 1))
    assert all(0 <= m <= 9 and 0 <= p <= 1 for sub in CIFAR10 for p, _, m in sub)
    top = {op.name: op.level(9) for op in OPS}  # the paper's appendix table at magnitude 9
    assert top["shearX"] == top["shearY"] == pytest.approx(0.3)
    assert top["translateX"] == pytest.approx(150 / 331) and top["rotate"] == 30
    assert (top["posterize"], top["solarize"]) == (4, 0)
    factors = sorted(OPS[OP_IDS[n]].value(9, neg) for n in ("color", "sharpness") for neg in (0, 1))
    assert factors == pytest.approx([0.1, 0.1, 1.9, 1.9])  # enhancements: 1 +- 0.9
    assert [OPS[OP_IDS["posterize"]].level(m) for m in range(10)] == [8, 8, 7, 7, 6, 6, 5, 5, 4, 4]
    assert not OPS[OP_IDS["rotate"]].signed  # the code's Rotate turns one way only


# --- the reference against Pillow (the paper's code runs Pillow's ops) ----------------------


def _pillow(name: str, image: np.ndarray, value: float) -> np.ndarray:
    """Op `name` as the paper's code (utils/transforms.py) runs it, its sign already in value."""
    from PIL import Image, ImageEnhance, ImageOps

    img = Image.fromarray(image.astype(np.uint8))
    fill = (128, 128, 128)
    w, h = img.size
    affine = {
        "shearX": ((1, value, 0, 0, 1, 0), Image.BICUBIC),
        "shearY": ((1, 0, 0, value, 1, 0), Image.BICUBIC),
        "translateX": ((1, 0, value * w, 0, 1, 0), Image.NEAREST),
        "translateY": ((1, 0, 0, 0, 1, value * h), Image.NEAREST),
    }
    enhance = {
        "color": ImageEnhance.Color,
        "contrast": ImageEnhance.Contrast,
        "brightness": ImageEnhance.Brightness,
        "sharpness": ImageEnhance.Sharpness,
    }
    if name in affine:
        data, resample = affine[name]
        out = img.transform(img.size, Image.AFFINE, data, resample, fillcolor=fill)
    elif name == "rotate":
        rot = img.convert("RGBA").rotate(value)
        out = Image.composite(rot, Image.new("RGBA", rot.size, (128,) * 4), rot).convert("RGB")
    elif name in enhance:
        out = enhance[name](img).enhance(value)
    elif name == "posterize":
        out = ImageOps.posterize(img, int(value))
    elif name == "solarize":
        out = ImageOps.solarize(img, value)
    else:
        out = getattr(ImageOps, name)(img)
    return np.asarray(out, np.float64)


# where Pillow's own arithmetic lands a pixel elsewhere than the exact computation: 16.16
# fixed point for a rotation's source coordinates (a neighbour pixel), its bicubic's rounding,
# autocontrast's doubles (x * scale + offset can fall just under the whole number it should be,
# most often at the top value): op -> (share of pixels off, by at most this many levels)
PILLOW_ROUNDING = {"rotate": (0.001, 255), "autocontrast": (0.01, 1)} | dict.fromkeys(
    SHEARS, (0.001, 1)
)


@pytest.mark.parametrize("name", [op.name for op in OPS])
def test_reference_op_is_pillows(name):
    """Every op at every magnitude and sign gives Pillow's pixels, but for Pillow's rounding."""
    share, levels = PILLOW_ROUNDING.get(name, (0.0, 0))
    images = _images(20, seed=OP_IDS[name])
    off = []
    for image, value in zip(images, _values(name), strict=True):
        diff = np.abs(reference_op(image, name, value) - _pillow(name, image, value))
        assert diff.max() <= levels, (name, value)
        off.append((diff > 0).mean())
    assert np.mean(off) <= share


# --- keras.ops against the reference ----------------------------------------------------------


@pytest.mark.parametrize("name", [op.name for op in OPS])
def test_each_op_matches_the_reference(name):
    """A batch of 20 images, one per magnitude and sign, the op applied to each; a few images
    left without an op (-1) come out unchanged."""
    images = _images(22, seed=100 + OP_IDS[name])
    values = np.array([*_values(name), 1.0, 1.0], np.float32)
    ids = np.array([OP_IDS[name]] * 20 + [-1, -1], np.int32)
    got = _np(_apply_ops(images, ids, values))
    want = np.stack(
        [reference_op(im, name, float(v)) for im, v in zip(images[:20], values[:20], strict=True)]
    )
    np.testing.assert_array_equal(got[20:], images[20:])
    if name in SHEARS:
        assert (got[:20] != want).mean() < 0.01 and np.abs(got[:20] - want).max() <= 128
    else:
        np.testing.assert_array_equal(got[:20], want)


def test_policy_with_fixed_draws_is_the_references():
    """Fixed draws: the same sub-policy, ops applied and signs as the reference, so the same
    images (but the shears' rare float32 edges); draws past every probability leave the
    images as they were (rounded to whole numbers, Pillow's uint8)."""
    images = _images(75, seed=7)
    draws = np.random.default_rng(8).uniform(0, 1, (75, DRAWS)).astype(np.float32)
    draws[:25, 0] = (np.arange(25) + 0.5) / 25  # every sub-policy at least once
    draws[:25, 1:3] = 0.0  # ... with both of its ops
    got = _np(_auto_augment(images, draws, "cifar10"))
    want = reference_auto_augment(images, draws, "cifar10")
    assert (got != want).mean() < 0.002 and got.dtype == np.float32
    none = draws.copy()
    none[:, 1:3] = 1.0
    np.testing.assert_array_equal(_np(_auto_augment(images + 0.3, none, "cifar10")), images)


def test_policy_applies_each_op_with_its_probability():
    """Over many images, op 1 of each sub-policy applies in its probability's share of the
    images that drew it (the draws are the policy's, the pixels tell)."""
    n = 4000
    draws = np.random.default_rng(9).uniform(0, 1, (n, DRAWS)).astype(np.float32)
    draws[:, 2] = 1.0  # op 2 never
    images = np.full((n, 4, 4, 3), 100.0, np.float32)
    images[:, 0, 0] = 0.0  # autocontrast, equalize, invert, brightness... all move a pixel
    changed = (_np(auto_augment(images, draws, "cifar10")) != images).any(axis=(1, 2, 3))
    index = np.minimum((draws[:, 0] * 25).astype(int), 24)
    for k in (0, 4, 13, 21):  # invert 0.1, autocontrast 0.5, brightness 0.9, translateY 0.9
        mine = index == k
        assert abs(changed[mine].mean() - CIFAR10[k][0][0]) < 0.15


# --- the in-step layer and the tf.data pipeline carry the choices ----------------------------


def _paper() -> Augmentation:
    """The paper-cifar augmentation but its erasing fill."""
    return Augmentation(flip=True, erasing=0.25, pad_crop=4, auto_augment="cifar10")


def test_random_augment_runs_the_policy_and_its_config_carries_it():
    images = _images(16, seed=3)
    layer = RandomAugment.of(replace(_paper(), erasing_fill="mean"), seed=5)
    out = augmented(layer, images)
    again = augmented(RandomAugment.of(replace(_paper(), erasing_fill="mean"), seed=5), images)
    without = augmented(RandomAugment.of(replace(_paper(), auto_augment=None), seed=5), images)
    np.testing.assert_array_equal(out, again)
    assert not np.array_equal(out, without) and 0 <= out.min() and out.max() <= 255
    config = layer.get_config()
    assert (config["auto_augment"], config["erasing_fill"]) == ("cifar10", "mean")
    assert RandomAugment.from_config(config).augmentation == layer.augmentation
    old = {k: v for k, v in config.items() if k not in ("auto_augment", "erasing_fill")}
    assert RandomAugment.from_config(old).augmentation == replace(
        layer.augmentation, auto_augment=None, erasing_fill="noise"
    )  # a model.keras saved before these pieces: what it trained with
    np.testing.assert_array_equal(_np(layer(images, training=False)), images)


@on_tensorflow
def test_tf_pipeline_applies_the_policy_after_the_crop_before_erasing():
    import tensorflow as tf

    from toolkit.data.tf_augment import augment_fn

    images = _images(8, seed=4)
    crop_only = augment_fn(replace(_paper(), erasing=0.0, auto_augment=None), 32, seed=0)
    policy = augment_fn(replace(_paper(), erasing=0.0), 32, seed=0)
    seed = np.array([3, 4], np.int64)
    cropped = crop_only(images, seed=seed).numpy()
    fold = tf.random.experimental.stateless_fold_in(seed, 5)  # the policy's own draws
    draws = tf.random.stateless_uniform((8, DRAWS), fold).numpy()
    got = policy(images, seed=seed).numpy()
    np.testing.assert_array_equal(got, _np(auto_augment(cropped, draws, "cifar10")))


# --- random erasing filled with the mean pixel -----------------------------------------------


def test_erase_with_the_mean_pixel_matches_the_reference():
    images = _images(64, seed=11)
    draws = np.random.default_rng(12).uniform(0, 1, (64, erasing.DRAWS)).astype(np.float32)
    mean = _np(erasing.mean_pixel(images))
    np.testing.assert_allclose(mean.reshape(3), images.mean(axis=(0, 1, 2)), rtol=1e-5)
    got = _np(erasing.erase(images, draws, mean, 0.5))
    np.testing.assert_array_equal(got, erasing.reference_erase(images, draws, mean, 0.5))
    erased = got != images
    np.testing.assert_array_equal(
        got[erased], np.broadcast_to(mean, images.shape)[erased]
    )  # every erased pixel is the mean pixel


def test_in_step_erasing_fills_the_batch_mean_before_augmentation():
    """The fill is the mean pixel of the batch as it came in (the padded crop's zeros and the
    flip do not move it)."""
    images = _images(32, seed=13)
    aug = Augmentation(flip=True, pad_crop=4, erasing=1.0, erasing_fill="mean")
    out = augmented(RandomAugment.of(aug, seed=2), images)
    mean = images.mean(axis=(0, 1, 2))
    hits = np.isclose(out, mean[None, None, None, :], atol=1e-3).all(axis=-1)
    assert hits.any(axis=(1, 2)).all()  # every image has its box of the mean pixel
    noise = augmented(RandomAugment.of(replace(aug, erasing_fill="noise"), seed=2), images)
    assert not np.isclose(noise, mean[None, None, None, :], atol=1e-3).all(axis=-1).any()


@on_tensorflow
def test_tf_erasing_fills_the_batch_mean():
    from toolkit.data.tf_augment import augment_fn

    images = _images(32, seed=14)
    aug = Augmentation(pad_crop=4, erasing=1.0, erasing_fill="mean")
    out = augment_fn(aug, 32, seed=0)(images).numpy()
    hits = np.isclose(out, images.mean(axis=(0, 1, 2)), atol=1e-3).all(axis=-1)
    assert hits.any(axis=(1, 2)).all()


# --- CutMix with alpha fixed -----------------------------------------------------------------


def _reference_cutmix(images, onehot, keep, corner, partner):
    """CutMix (Yun et al. 2019) per image from explicit draws: a box of sides sqrt(1 - keep)
    of the image's at `corner` of the room left, the partner's pixels pasted in it; labels by
    the share of pixels each image shows."""
    out, labels = images.copy(), onehot.copy()
    n, height, width, _ = images.shape
    for i in range(n):
        side = np.sqrt(1.0 - keep[i])
        box_h, box_w = side * height, side * width
        top, left = corner[i, 0] * (height - box_h), corner[i, 1] * (width - box_w)
        pasted = 0
        for y in range(height):
            for x in range(width):
                if top <= y < top + box_h and left <= x < left + box_w:
                    out[i, y, x] = images[partner[i], y, x]
                    pasted += 1
        kept = 1.0 - pasted / (height * width)
        labels[i] = kept * onehot[i] + (1.0 - kept) * onehot[partner[i]]
    return out, labels


def test_numpy_cutmix_with_fixed_alpha_is_the_reference_given_its_draws():
    images = _images(16, seed=15, size=12)
    onehot = np.eye(4, dtype=np.float32)[np.arange(16) % 4]
    got_images, got_labels = cutmix(images, onehot, 1.0, np.random.default_rng(3), "fixed")
    rng = np.random.default_rng(3)  # the draws, in cutmix's order: no alpha drawn when fixed
    keep = rng.beta(1.0, 1.0, 16)
    corner = np.stack([rng.uniform(0, 1, 16), rng.uniform(0, 1, 16)], axis=1)
    partner = rng.permutation(16)
    want_images, want_labels = _reference_cutmix(images, onehot, keep, corner, partner)
    np.testing.assert_array_equal(got_images, want_images)
    np.testing.assert_allclose(got_labels, want_labels, rtol=1e-6)


def test_cutmix_alpha_fixed_draws_beta_1_where_keras_draws_its_alpha():
    """Beta(1, 1) is U(0, 1): the kept share's mean 1/2, variance 1/12; Keras' rule (alpha
    from U(0, 1)) spreads it more: variance (ln 3) / 8 = 0.137."""
    n = 10_000  # 32x32: the pixel grid's rounding of the box moves the shares little
    images = np.broadcast_to(np.arange(n, dtype=np.float32)[:, None, None, None], (n, 32, 32, 1))
    onehot = np.zeros((n, 1), np.float32)

    def kept(rule: str, count: int, seed: int) -> np.ndarray:
        """Each image's share of its own pixels after CutMix (its value is its index)."""
        mixed, _ = cutmix(images[:count], onehot[:count], 1.0, np.random.default_rng(seed), rule)
        return (mixed == images[:count]).mean(axis=(1, 2, 3))

    fixed = kept("fixed", n, 0)
    assert abs(fixed.mean() - 0.5) < 0.01 and abs(fixed.var() - 1 / 12) < 0.006
    uniform = np.concatenate([kept("uniform", 50, s) for s in range(200)])
    assert uniform.var() > 0.11  # (ln 3) / 8 but for the pixel grid
    mix = Mixing(cutmix=1.0, num_classes=2, cutmix_alpha="fixed")  # what the recipe builds
    labels = np.arange(64) % 2
    got, _ = mix_batch(images[:64], labels, mix, np.random.default_rng(1))
    rng = np.random.default_rng(1)
    rng.uniform(0.0, 1.0, 2)  # mix_batch's draws choosing the mix
    want, _ = cutmix(images[:64], np.eye(2, dtype=np.float32)[labels], 1.0, rng, "fixed")
    np.testing.assert_array_equal(got, want)


@on_tensorflow
def test_tf_cutmix_with_alpha_fixed_draws_beta_1():
    from toolkit.data.tf_pipeline import CUTMIX_LAYERS

    images = np.zeros((20_000, 4, 4, 1), np.float32)
    fixed = CUTMIX_LAYERS["fixed"](factor=1.0, seed=0, dtype="float32")
    weight = fixed.get_random_transformation(images, training=True)["mix_weight"].numpy()
    assert abs(weight.mean() - 0.5) < 0.01 and abs(weight.var() - 1 / 12) < 0.005
    keras_rule = CUTMIX_LAYERS["uniform"](factor=1.0, seed=0, dtype="float32")
    spread = [
        keras_rule.get_random_transformation(images[:200], training=True)["mix_weight"].numpy()
        for _ in range(100)
    ]
    assert np.var(np.concatenate(spread)) > 0.11  # (ln 3) / 8


# --- the paper-cifar recipe ------------------------------------------------------------------


@pytest.mark.parametrize("model", ["vit-lsa", "vit", "shiftvit"])
def test_paper_cifar_uses_the_three_pieces(model):
    recipe = get_preset(model, "paper-cifar").train
    assert recipe.augmentation.auto_augment == "cifar10" and recipe.rand_augment is None
    assert recipe.augmentation.erasing_fill == "mean" and recipe.cutmix_alpha == "fixed"
    assert (recipe.cutmix, recipe.mixup, recipe.mix_prob) == (1.0, 1.0, 0.5)


def test_recipe_takes_the_pieces_and_refuses_two_policies():
    values = parse_recipe("auto_augment=cifar10,erasing_fill=mean,cutmix_alpha=fixed")
    assert values == {"auto_augment": "cifar10", "erasing_fill": "mean", "cutmix_alpha": "fixed"}
    assert parse_recipe("auto_augment=none") == {"auto_augment": None}
    for bad in ("auto_augment=imagenet", "erasing_fill=zero", "cutmix_alpha=beta"):
        with pytest.raises(UsageError) as error:
            parse_recipe(bad)
        assert "\n" not in str(error.value) and bad.split("=")[0] in str(error.value)
    paper = get_preset("vit-lsa", "paper-cifar").train
    with pytest.raises(UsageError, match="one at a time: pass --recipe rand_augment=none"):
        check_recipe(with_recipe(paper, parse_recipe("rand_augment=2:0.5")))
    check_recipe(with_recipe(paper, parse_recipe("rand_augment=2:0.5,auto_augment=none")))


def test_train_refuses_both_policies_in_one_line_before_training(tmp_path, capsys):
    from toolkit.cli.main import main

    out = tmp_path / "run"
    argv = ["train", "--model", "vit", "--preset", "tiny", "--data", "shapes:200"]
    code = main([*argv, "--out", str(out), "--recipe", "auto_augment=cifar10,rand_augment=2:0.5"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "auto_augment" in err and "\n" not in err and not out.exists()


def test_config_json_without_the_pieces_loads_as_before():
    data = json.loads(json.dumps(get_preset("vit-lsa", "paper-cifar").to_dict()))
    del data["train"]["cutmix_alpha"]
    del data["train"]["augmentation"]["auto_augment"]
    del data["train"]["augmentation"]["erasing_fill"]
    train = preset_from_dict(data).train
    assert train.cutmix_alpha == "uniform" and train.augmentation.auto_augment is None
    assert train.augmentation.erasing_fill == "noise"
    paper = get_preset("vit-lsa", "paper-cifar")
    assert preset_from_dict(json.loads(json.dumps(paper.to_dict()))) == paper
