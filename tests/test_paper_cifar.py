"""The `paper-cifar` presets: the SPT/LSA paper's CIFAR-10 ViT (vit-lsa, and vit without SPT
and LSA) against the paper's own code, and a ShiftViT of as many MACs; all three train on
TensorFlow, export and verify, vit-lsa and the ShiftViT train on JAX too (slow).

PAPER_CODE holds the counts of the paper's code (aanna0701/SPT_LSA_ViT at 54bd796a,
models/vit.py and models/SPT.py, built with create_model's `vit` arguments):

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch einops fvcore
    git clone https://github.com/aanna0701/SPT_LSA_ViT /tmp/spt_code
    /tmp/torchvenv/bin/python studies/spt_lsa_counts.py /tmp/spt_code \
        --fixture tests/data/spt_lsa_small.npz

on 2026-11-27 with torch 2.14.1 (CPU), einops 0.8.2 and fvcore 0.1.5.post20221221: trainable
parameters, and MACs as torch's FlopCounterMode counts them (its FLOPs / 2: every linear,
matmul and einsum, the convention of toolkit.models.macs). The fixture is a small model of the
same code (dim 24, depth 2) with perturbed weights, inputs and its logits.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import onnx
import pytest
from jax_subprocess import run_without_tensorflow

from toolkit.cli.main import main
from toolkit.common.backend import installed
from toolkit.data import Augmentation
from toolkit.models import build_model, count_macs, get_preset, preset_from_dict
from toolkit.models.architectures import ViTArch
from toolkit.models.paper_figures import PAPER_FIGURES
from toolkit.models.presets import SMALL_IMAGES, workload
from toolkit.models.recipes import TrainRecipe
from toolkit.training.options import TrainOptions
from toolkit.training.train import train

TESTS = Path(__file__).resolve().parent
FIXTURE = TESTS / "data" / "spt_lsa_small.npz"
PRESET = "paper-cifar"
MODELS = ("vit-lsa", "vit", "shiftvit")

# (model, dataset) -> (parameters, MACs) of the paper's code (see the module docstring); its
# fvcore counts, which add 5 operations per LayerNorm element, are 188,837,424 and 191,273,520
# (CIFAR-10), 190,643,376 and 200,387,760 (Tiny-ImageNet)
PAPER_CODE = {
    ("vit", "CIFAR10"): (2_692_426, 187_716_864),
    ("vit-lsa", "CIFAR10"): (2_729_878, 190_076_160),
    ("vit", "T-IMNET"): (2_756_744, 189_522_816),
    ("vit-lsa", "T-IMNET"): (2_906_228, 198_960_000),
}
# the ShiftViT of as many MACs: patch 2, widths 96-384, blocks 3-10-6
SHIFTVIT_COUNTS = (5_521_738, 189_042_432)
# the README's FLOPs of the paper's ViTs are its Tiny-ImageNet models' (64x64, patch 8, 200
# classes): the code's matmul MACs there are 0.15% and 0.12% under them, while at CIFAR-10's
# 32x32 they are 1.1% and 4.6% under
FLOPS_TOLERANCE = 0.002


def _at_tiny_imagenet(model: str):
    """The preset as the paper's code builds it for Tiny-ImageNet: 64x64 input, patch 8."""
    preset = get_preset(model, PRESET)
    arch = replace(preset.arch, image_size=64, patch_size=8)
    return build_model(replace(preset, arch=arch), (64, 64, 3), 200)


@pytest.mark.parametrize("model", ["vit", "vit-lsa"])
def test_parameters_and_macs_are_the_paper_codes(model):
    net = build_model(get_preset(model, PRESET), SMALL_IMAGES.input_shape, 10)
    assert (net.count_params(), count_macs(net)) == PAPER_CODE[model, "CIFAR10"]
    tiny_imagenet = _at_tiny_imagenet(model)
    macs = count_macs(tiny_imagenet)
    assert (tiny_imagenet.count_params(), macs) == PAPER_CODE[model, "T-IMNET"]
    paper = PAPER_FIGURES[model, PRESET]
    assert abs(macs / 1e9 - paper.gflops) <= FLOPS_TOLERANCE * paper.gflops
    assert macs < paper.gflops * 1e9  # what the README adds (norms, softmax) is not counted


def test_the_shiftvit_has_the_paper_vits_macs():
    net = build_model(get_preset("shiftvit", PRESET), SMALL_IMAGES.input_shape, 10)
    assert (net.count_params(), count_macs(net)) == SHIFTVIT_COUNTS
    for model in ("vit", "vit-lsa"):
        assert abs(SHIFTVIT_COUNTS[1] / PAPER_CODE[model, "CIFAR10"][1] - 1) < 0.01


# the order of SPT's four diagonal shifts, as (row, column) offsets of the pixel each view
# puts at (i, j) in units of patch_size // 2: the paper's PatchShifting concatenates
# [x, x_lu, x_ru, x_lb, x_rb] (x_lu = x_pad[:, :, :-2s, :-2s] holds x[i - s, j - s]);
# toolkit.ops.shifted_images [x, left_up, left_down, right_up, right_down]
# (reference_shifted_patches' offsets). The same views in another order: a fixed permutation
# of the LayerNorm's and the projection's input rows.
PAPER_SHIFTS = [(0, 0), (-1, -1), (-1, 1), (1, -1), (1, 1)]
TOOLKIT_SHIFTS = [(0, 0), (1, 1), (-1, 1), (1, -1), (-1, -1)]


def _spt_rows(patch: int, channels: int) -> np.ndarray:
    """Row f of the toolkit's flat SPT patch (pixel, view, channel) -> the paper's row."""
    views = [PAPER_SHIFTS.index(shift) for shift in TOOLKIT_SHIFTS]
    return np.array(
        [
            (pixel * 5 + views[view]) * channels + c
            for pixel in range(patch * patch)
            for view in range(5)
            for c in range(channels)
        ]
    )


def _load_paper_weights(net: keras.Model, arrays, model: str, arch: ViTArch) -> None:
    """The paper code's state_dict (fixture arrays `MODEL/NAME`) into the toolkit's model."""

    def get(name: str) -> np.ndarray:
        return arrays[f"{model}/{name}"]

    def linear(name: str) -> list[np.ndarray]:
        return [get(f"{name}.weight").T, get(f"{name}.bias")]

    def norm(name: str) -> list[np.ndarray]:
        return [get(f"{name}.weight"), get(f"{name}.bias")]

    tokenize = net.get_layer("tokenize")
    if arch.spt:
        rows = _spt_rows(arch.patch_size, 3)
        gamma, beta = norm("to_patch_embedding.merging.1")
        tokenize.layer_norm.set_weights([gamma[rows], beta[rows]])
        kernel, bias = linear("to_patch_embedding.merging.2")
        tokenize.projection.set_weights([kernel[rows], bias])
    else:
        tokenize.projection.set_weights(linear("to_patch_embedding.1"))
    net.get_layer("class_token").set_weights([get("cls_token")])
    net.get_layer("position").set_weights([get("pos_embedding")[0]])
    for i in range(arch.depth):
        block = f"transformer.layers.{i}"
        net.get_layer(f"block{i}_norm1").set_weights(norm(f"{block}.0.norm"))
        attention = net.get_layer(f"block{i}_attn")
        q, k, v = np.split(get(f"{block}.0.fn.to_qkv.weight"), 3, axis=0)
        for dense, weight in zip(
            (attention.query_dense, attention.key_dense, attention.value_dense),
            (q, k, v),
            strict=True,
        ):
            dense.set_weights([weight.T])  # no bias, as the paper's to_qkv
        attention.output_dense.set_weights(linear(f"{block}.0.fn.to_out.0"))
        if arch.lsa:
            attention.scale.assign(get(f"{block}.0.fn.scale"))
        net.get_layer(f"block{i}_norm2").set_weights(norm(f"{block}.1.norm"))
        mlp = net.get_layer(f"block{i}_mlp")
        mlp.dense_layers[0].set_weights(linear(f"{block}.1.fn.net.0"))
        mlp.dense_layers[1].set_weights(linear(f"{block}.1.fn.net.3"))
    net.get_layer("head_norm").set_weights(norm("mlp_head.0"))
    net.get_layer("logits").set_weights(linear("mlp_head.1"))


@pytest.mark.parametrize("model", ["vit", "vit-lsa"])
def test_the_paper_codes_model_and_this_one_give_the_same_logits(model):
    """The paper code's small model's weights, loaded here, give its logits: class token,
    position table, SPT (its shifts reordered), pre-norm blocks, LSA's per-head scale and
    masked diagonal, GELU MLPs and the class token's head compute what the code computes."""
    arrays = np.load(FIXTURE)
    arch = replace(
        get_preset(model, PRESET).arch, dim=24, depth=2, num_heads=3, key_dim=8,
        mlp_units=(48, 24),
    )  # fmt: skip
    identity = (np.zeros(3), np.ones(3))  # the fixture's inputs are normalised already
    net = build_model(replace(get_preset(model, PRESET), arch=arch), (32, 32, 3), 10, identity)
    _load_paper_weights(net, arrays, model, arch)
    x = arrays["x"].transpose(0, 2, 3, 1)  # NCHW -> NHWC
    logits = keras.ops.convert_to_numpy(net(x, training=False))
    np.testing.assert_allclose(logits, arrays[f"{model}/y"], rtol=1e-4, atol=1e-5)
    assert np.abs(arrays[f"{model}/y"]).max() > 0.1  # not a degenerate comparison


def test_architectures_are_the_paper_codes():
    lsa, vanilla = get_preset("vit-lsa", PRESET).arch, get_preset("vit", PRESET).arch
    assert lsa == ViTArch(
        image_size=32, patch_size=4, dim=192, depth=9, num_heads=12, key_dim=16,
        mlp_units=(384, 192), dropout=0.0, head_units=(), head_dropout=0.0, epsilon=1e-5,
        spt=True, lsa=True, head="class_token", drop_path=0.1, mlp_activate_last=False,
        qkv_bias=False, lsa_temperature="per_head",
    )  # fmt: skip
    assert vanilla == replace(lsa, spt=False, lsa=False)
    assert get_preset("shiftvit", PRESET).train == get_preset("vit-lsa", PRESET).train
    assert {workload(PRESET)} == {SMALL_IMAGES}


def test_recipe_is_the_paper_codes_where_the_toolkit_has_the_piece():
    """main.py's defaults: AdamW 1e-3, weight decay 0.05, batch 128, 10 of 100 epochs of
    warm-up then cosine, a 4-pixel-padded random crop, AutoAugment's CIFAR-10 policy, label
    smoothing 0.1, Mixup (1) or CutMix (beta 1) on half the batches, random erasing 0.25
    filled with the mean (tests/test_paper_pieces.py tests the three pieces). Its
    sampler at `--ra 3` (drawn by the paper's code into the fixture) repeats no image: an epoch
    is three passes of 1171 batches, so 300 epochs here, repeated augmentation off: the same
    passes, warm-up passes and, on as many images, steps."""
    recipe = get_preset("vit-lsa", PRESET).train
    assert recipe == TrainRecipe(
        batch_size=128, epochs=300, lr_start=1e-6, lr_max=1e-3, weight_decay=0.05,
        warmup_fraction=0.1,
        augmentation=Augmentation(
            flip=True, erasing=0.25, pad_crop=4, auto_augment="cifar10", erasing_fill="mean"
        ),
        label_smoothing=0.1, mixup=1.0, cutmix=1.0, mix_prob=0.5, cutmix_alpha="fixed",
    )  # fmt: skip
    assert recipe.repeat_augment == 1 and recipe.ema is None
    batches, drawn, most_per_pass = np.load(FIXTURE)["sampler"]
    cifar_train = 50_000
    assert most_per_pass == 1 and round(drawn / cifar_train) == 3  # three passes, no repeats
    steps = -(-cifar_train // recipe.batch_size) * recipe.epochs
    assert abs(steps / (batches * 100) - 1) < 0.003  # on all 50,000: 117,300 here, 117,100 there
    assert recipe.epochs * recipe.warmup_fraction == 3 * 10  # warm-up passes: 10 epochs of 3


def test_lsa_per_head_scale_matches_numpy_and_round_trips(tmp_path):
    from layer_checks import check_layer

    from toolkit.ops import LocalitySelfAttention, reference_self_attention

    layer = LocalitySelfAttention(3, 4, qkv_bias=False, temperature="per_head", name="op")
    check_layer(layer, (2, 5, 6), (2, 5, 6), tmp_path)
    assert [w.path.split("/")[-1] for w in layer.weights].count("bias") == 1  # output's only
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.scale), [0.5] * 3)
    layer.scale.assign([0.3, 0.5, 0.9])
    x = np.random.default_rng(1).standard_normal((2, 5, 6)).astype("float32")
    got = keras.ops.convert_to_numpy(layer(x))
    zeros = np.zeros(12)
    kernels = [
        keras.ops.convert_to_numpy(d.kernel)
        for d in (layer.query_dense, layer.key_dense, layer.value_dense)
    ]
    out = layer.output_dense
    want, _ = reference_self_attention(
        x, kernels[0], zeros, kernels[1], zeros, kernels[2], zeros,
        keras.ops.convert_to_numpy(out.kernel), keras.ops.convert_to_numpy(out.bias),
        num_heads=3, key_dim=4, locality=True, head_scale=np.array([0.3, 0.5, 0.9]),
    )  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_per_head_temperature_is_lsas_only():
    from toolkit.ops import SelfAttention

    with pytest.raises(ValueError, match="temperature 'per_head'"):
        SelfAttention(2, 4, temperature="per_head")
    with pytest.raises(ValueError, match="ViTArch.head 'mean'"):
        arch = replace(get_preset("vit", "tiny").arch, head="mean")
        build_model(replace(get_preset("vit", "tiny"), arch=arch), (32, 32, 3), 10)


def test_class_token_layers(tmp_path):
    from layer_checks import check_layer

    from toolkit.models.class_token import ClassToken, ClassTokenReadout

    for layer, output_shape, folder in (
        (ClassToken(), (2, 6, 4), "a"),
        (ClassTokenReadout(), (2, 4), "b"),
    ):
        (tmp_path / folder).mkdir()
        check_layer(layer, (2, 5, 4), output_shape, tmp_path / folder)
    layer = ClassToken()
    x = np.random.default_rng(0).standard_normal((3, 5, 4)).astype("float32")
    y = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_array_equal(y[:, 1:], x)
    token = keras.ops.convert_to_numpy(layer.token)[0, 0]
    np.testing.assert_array_equal(y[:, 0], np.broadcast_to(token, (3, 4)))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(ClassTokenReadout()(y)), y[:, 0])


def test_stochastic_depth_is_in_every_block_at_the_same_rate_and_off_at_inference():
    net = build_model(get_preset("vit-lsa", PRESET), SMALL_IMAGES.input_shape, 10)
    rates = [layer.rate for layer in net.layers if type(layer).__name__ == "DropPath"]
    assert rates == [0.1] * 18  # both branches of the 9 blocks
    x = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    inference = keras.ops.convert_to_numpy(net(x, training=False))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(net(x)), inference)


# --- training on both backends, export and verify (slow) ----------------------------------------

DATA = "shapes:32"  # 24 training images: 3 steps of 8
TRAIN = {"epochs": 1, "batch_size": 8}
# formats exported per model (each conversion takes ~10 s): vit-lsa's new layers through both
# converters. ShiftViT is not trained here on TensorFlow: its layers are those of every ShiftViT
# export test, its stochastic depth is checked above and the recipe's tf.data pipeline is the
# same for both models (it trains on JAX below). vit is vit-lsa less SPT and LSA: its bias-free
# q/k/v reaching the attention fusion 2-D have unit tests (tests/test_onnx_rewrite.py)
FORMATS = {"vit-lsa": "onnx,tflite"}
# on JAX: vit's layers are vit-lsa's less SPT and LSA, each trained on JAX by the tiny presets
JAX_MODELS = ("vit-lsa", "shiftvit")


@pytest.mark.slow
@pytest.mark.parametrize("model", list(FORMATS))
def test_preset_trains_exports_and_verifies_on_tensorflow(model, tmp_path, capsys):
    """A few steps with the whole recipe (tf.data: AutoAugment, erasing, Mixup/CutMix), then
    float formats (FORMATS) exported and verified against the Keras model."""
    out = train(TrainOptions(model, PRESET, DATA, **TRAIN), out=tmp_path / "run")
    config = json.loads((out / "config.json").read_text())
    assert preset_from_dict(config["preset"]) == replace(
        get_preset(model, PRESET),
        train=replace(get_preset(model, PRESET).train, **TRAIN),
    )
    history = (out / "history.csv").read_text().splitlines()
    row = dict(zip(history[0].split(","), history[-1].split(","), strict=True))
    assert np.isfinite(float(row["loss"]))
    assert main(["export", str(out), "--format", FORMATS[model]]) == 0
    graph = onnx.load(str(out / "export" / "model.onnx"))  # bias-free q/k/v, LSA's scale fuse
    assert [n.op_type for n in graph.graph.node].count("Attention") == 9
    assert main(["verify", str(out), "--models-only"]) == 0
    assert json.loads((out / "verify.json").read_text())["passed"]
    assert "verify: PASSED" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not installed("jax"), reason="jax not installed: pip install -e '.[dev]'")
def test_presets_train_on_jax_without_tensorflow(tmp_path):
    """A few steps of vit-lsa and shiftvit on JAX (JAX_MODELS), TensorFlow unimportable, with
    the whole recipe: AutoAugment, erasing and the crop compile into JAX's train step."""
    code = f"""
        from toolkit.training.options import TrainOptions
        from toolkit.training.train import train
        for model in {JAX_MODELS!r}:
            options = TrainOptions(model, {PRESET!r}, {DATA!r}, epochs=1, batch_size=8)
            train(options, out={str(tmp_path)!r} + "/" + model)
    """
    proc = run_without_tensorflow(["-c", textwrap.dedent(code)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for model in JAX_MODELS:
        run = tmp_path / model
        config = json.loads((run / "config.json").read_text())
        assert config["backend"]["name"] == "jax"
        recipe = preset_from_dict(config["preset"]).train
        assert (recipe.mixup, recipe.cutmix, recipe.label_smoothing) == (1.0, 1.0, 0.1)
        assert recipe.augmentation.auto_augment == "cifar10" and recipe.cutmix_alpha == "fixed"
        assert np.isfinite(json.loads((run / "metrics.json").read_text())["test_top1"])
        keras.saving.load_model(run / "model.keras", safe_mode=True)  # and on TensorFlow
