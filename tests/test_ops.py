"""Custom ops against independent NumPy references, plus config/save/load checks per layer.

Backend-neutral: tests/test_backends.py runs this module on JAX (and PyTorch when installed).
"""

import math

import keras
import numpy as np
import pytest
from backend_calls import layer_gradients, training_calls
from keras import ops
from layer_checks import check_layer

from toolkit.ops import (
    MLP,
    AdditiveMaskLocalitySelfAttention,
    CenteredLayerNorm,
    DepthwisePartialShift,
    Dropout,
    DropPath,
    LocalitySelfAttention,
    PartialShift,
    PatchConv2D,
    SelfAttention,
    ShiftedPatchTokenization,
    gelu,
    patches,
    reference_layer_norm,
    reference_partial_shift,
    reference_patch_conv,
    reference_self_attention,
    reference_shifted_patches,
    shifted_images,
    shifted_patches,
)

LAYER_CASES = [
    (lambda: PartialShift(), (2, 12, 12, 96), (2, 12, 12, 96)),
    (lambda: PartialShift(num_div=12, shift_pixel=2), (2, 7, 9, 50), (2, 7, 9, 50)),
    (lambda: DepthwisePartialShift(num_div=12, shift_pixel=2), (2, 7, 9, 50), (2, 7, 9, 50)),
    (lambda: ShiftedPatchTokenization(6, 64), (2, 24, 24, 3), (2, 16, 64)),
    (lambda: ShiftedPatchTokenization(4, 32, vanilla=True), (2, 8, 12, 3), (2, 6, 32)),
    (lambda: SelfAttention(4, 16, dropout=0.1), (2, 10, 32), (2, 10, 32)),
    (lambda: LocalitySelfAttention(4, 64, dropout=0.1), (2, 16, 64), (2, 16, 64)),
    (lambda: AdditiveMaskLocalitySelfAttention(2, 8), (2, 9, 16), (2, 9, 16)),
    (lambda: PatchConv2D(8, 4), (2, 12, 12, 3), (2, 3, 3, 8)),
    (lambda: PatchConv2D(6, 2, padding="valid", use_bias=False), (2, 7, 5, 4), (2, 3, 2, 6)),
    (lambda: DropPath(0.1, seed=3), (2, 8, 8, 4), (2, 8, 8, 4)),
    (lambda: Dropout(0.2, seed=3), (2, 5, 7), (2, 5, 7)),
    (lambda: MLP([128, 64], 0.1), (2, 10, 32), (2, 10, 64)),
    (lambda: MLP([64, 32], 0.2, activate_last=False), (2, 5, 5, 32), (2, 5, 5, 32)),
    (lambda: CenteredLayerNorm(epsilon=1e-5), (2, 6, 6, 24), (2, 6, 6, 24)),
]


def rng(seed: int = 0) -> np.random.Generator:
    """Seeded NumPy generator so every test is reproducible."""
    return np.random.default_rng(seed)


def to_np(x: object) -> np.ndarray:
    """Backend tensor or Keras variable to NumPy."""
    if isinstance(x, keras.Variable):
        x = x.value
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize(
    ("factory", "in_shape", "out_shape"),
    LAYER_CASES,
    ids=[f"case{i}-{'x'.join(map(str, c[1]))}" for i, c in enumerate(LAYER_CASES)],
)
def test_layer_config_save_load_shape(factory, in_shape, out_shape, tmp_path):
    check_layer(factory(), in_shape, out_shape, tmp_path)


@pytest.mark.parametrize("shape", [(2, 5, 5, 24), (3, 7, 64)])
def test_centered_layer_norm_matches_reference_and_keras(shape):
    x = (rng(1).standard_normal(shape) * 3 + 2).astype("float32")
    gamma = rng(2).standard_normal(shape[-1]).astype("float32")
    beta = rng(3).standard_normal(shape[-1]).astype("float32")
    layers = [CenteredLayerNorm(epsilon=1e-5), keras.layers.LayerNormalization(epsilon=1e-5)]
    for layer in layers:
        layer.build(shape)
        layer.set_weights([gamma, beta])
    ours, theirs = (to_np(layer(x)) for layer in layers)
    np.testing.assert_allclose(ours, reference_layer_norm(x, gamma, beta, 1e-5), atol=2e-5)
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


@pytest.mark.parametrize("axis", [1, [1, 2]])
def test_centered_layer_norm_rejects_other_axes(axis):
    with pytest.raises(ValueError, match="last axis only"):
        CenteredLayerNorm(axis=axis).build((2, 4, 8))


# --- gelu -------------------------------------------------------------------------------


def test_gelu_matches_exact_keras_gelu_and_erf_formula():
    x = np.linspace(-8.0, 8.0, 4001, dtype="float32")
    ours = to_np(gelu(ops.convert_to_tensor(x)))
    keras_exact = to_np(keras.activations.gelu(x, approximate=False))
    np.testing.assert_allclose(ours, keras_exact, atol=1e-6, rtol=0)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(ours, 0.5 * x * (1 + erf(x / math.sqrt(2))), atol=1e-6, rtol=0)


def test_gelu_activation_round_trips_in_safe_mode(tmp_path):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(4, activation=gelu)(inputs))
    model.save(tmp_path / "g.keras")
    reloaded = keras.saving.load_model(tmp_path / "g.keras", safe_mode=True)
    assert reloaded.layers[-1].activation is gelu


# --- PartialShift -----------------------------------------------------------------------


def test_reference_partial_shift_by_hand():
    x = np.arange(1 * 3 * 4 * 5, dtype="float32").reshape(1, 3, 4, 5) + 1
    out = reference_partial_shift(x, num_div=5, shift_pixel=1)  # g = 1
    np.testing.assert_array_equal(out[0, :, :3, 0], x[0, :, 1:, 0])  # left
    np.testing.assert_array_equal(out[0, :, 3, 0], 0)
    np.testing.assert_array_equal(out[0, :, 1:, 1], x[0, :, :3, 1])  # right
    np.testing.assert_array_equal(out[0, :, 0, 1], 0)
    np.testing.assert_array_equal(out[0, :2, :, 2], x[0, 1:, :, 2])  # up
    np.testing.assert_array_equal(out[0, 2, :, 2], 0)
    np.testing.assert_array_equal(out[0, 1:, :, 3], x[0, :2, :, 3])  # down
    np.testing.assert_array_equal(out[0, 0, :, 3], 0)
    np.testing.assert_array_equal(out[..., 4], x[..., 4])  # unchanged


@pytest.mark.parametrize(
    ("shape", "num_div", "shift_pixel"),
    [
        ((2, 12, 12, 96), 12, 1),  # ShiftViT seed shape
        ((2, 7, 9, 50), 12, 1),  # C not divisible by num_div, odd sizes
        ((2, 7, 9, 50), 12, 2),
        ((1, 5, 6, 8), 2, 3),  # g = 4, nothing left unchanged
        ((1, 3, 4, 24), 12, 5),  # shift past both edges: moved groups become zeros
        ((1, 3, 8, 24), 12, 4),  # shift past H only
        ((1, 4, 4, 8), 12, 1),  # g = 0: identity
    ],
)
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("cls", [PartialShift, DepthwisePartialShift], ids=["slices", "depthwise"])
def test_partial_shift_bit_exact(cls, shape, num_div, shift_pixel, training):
    x = rng().standard_normal(shape).astype("float32")
    got = to_np(cls(num_div, shift_pixel)(x, training=training))
    np.testing.assert_array_equal(got, reference_partial_shift(x, num_div, shift_pixel))


@pytest.mark.parametrize("cls", [PartialShift, DepthwisePartialShift], ids=["slices", "depthwise"])
@pytest.mark.parametrize("spatial", [(7, 9), (None, None)], ids=["static", "dynamic"])
def test_partial_shift_dynamic_batch_graph(cls, spatial):
    model = keras.Sequential([keras.Input((*spatial, 50)), cls(12, 2)])
    for batch in (1, 3):
        x = rng(batch).standard_normal((batch, 7, 9, 50)).astype("float32")
        np.testing.assert_array_equal(to_np(model(x)), reference_partial_shift(x, 12, 2))


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_partial_shift_gradient_moves_back(training):
    x = rng(8).standard_normal((2, 6, 7, 30)).astype("float32")
    upstream = rng(9).standard_normal((2, 6, 7, 30)).astype("float32")
    (grad,) = layer_gradients(
        PartialShift(12, 2), x, lambda y: ops.sum(ops.multiply(y, upstream)), training=training
    )
    # the shift is linear with a 0/1 matrix S: the gradient is S^T applied to the upstream
    basis = np.eye(6 * 7 * 30, dtype="float32").reshape(-1, 1, 6, 7, 30)
    columns = np.stack([reference_partial_shift(b, 12, 2).ravel() for b in basis])  # S e_i
    for n in range(2):
        np.testing.assert_array_equal(grad[n].ravel(), columns @ upstream[n].ravel())


# --- Patch convolution ------------------------------------------------------------------

PATCH_CONV_CASES = [
    ((2, 48, 48, 3), 4, 96, "same"),  # ShiftViT seed patch embedding
    ((2, 3, 3, 8), 2, 16, "same"),  # odd size: the last merge of the seed (3 -> 2)
    ((1, 10, 7, 5), 4, 6, "same"),  # pads 2 rows (1 before, 1 after) and 1 column after
    ((1, 10, 7, 5), 3, 4, "valid"),
]


@pytest.mark.parametrize(("shape", "k", "filters", "padding"), PATCH_CONV_CASES)
@pytest.mark.parametrize("training", [False, True])
def test_patch_conv_matches_reference(shape, k, filters, padding, training):
    layer = PatchConv2D(filters, k, padding=padding)
    layer.build(shape)
    layer.bias.assign(rng(1).standard_normal(filters).astype("float32"))
    x = rng(2).standard_normal(shape).astype("float32")
    got = to_np(layer(x, training=training))
    ref = reference_patch_conv(x, to_np(layer.kernel), to_np(layer.bias), padding)
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)


def _square_sum(y):
    return ops.sum(ops.square(y))


def test_patch_conv_training_gradients_equal_convolution_gradients():
    layer = PatchConv2D(8, 2)
    x = rng(3).standard_normal((2, 5, 6, 4)).astype("float32")
    layer.build(x.shape)
    grads = [
        layer_gradients(layer, x, _square_sum, training=training, weights=[layer.kernel])
        for training in (False, True)
    ]
    for conv, matmul in zip(*grads, strict=True):
        np.testing.assert_allclose(matmul, conv, atol=1e-4, rtol=1e-5)


def test_patch_conv_rejects_other_strides():
    with pytest.raises(TypeError):
        PatchConv2D(8, 2, strides=1)


# --- Shifted patch tokenization ---------------------------------------------------------

PATCH_CASES = [
    ((2, 24, 24, 3), 6),
    ((1, 72, 72, 3), 6),  # SPT seed shape
    ((2, 8, 12, 2), 4),
    ((1, 9, 6, 1), 3),  # odd patch: shift 1
    ((1, 4, 4, 2), 1),  # shift 0
]


@pytest.mark.parametrize(("shape", "patch_size"), PATCH_CASES)
def test_shifted_patches_match_reference_and_extract_patches(shape, patch_size):
    x = rng().standard_normal(shape).astype("float32")
    expected = reference_shifted_patches(x, patch_size)
    np.testing.assert_array_equal(to_np(shifted_patches(x, patch_size)), expected)

    if keras.backend.backend() != "tensorflow":
        return  # the cross-check below is against TensorFlow's own op
    import tensorflow as tf

    p = patch_size
    extract = tf.image.extract_patches(
        to_np(shifted_images(x, p)), [1, p, p, 1], [1, p, p, 1], [1, 1, 1, 1], "VALID"
    )
    np.testing.assert_array_equal(extract.numpy().reshape(expected.shape), expected)
    plain = tf.image.extract_patches(x, [1, p, p, 1], [1, p, p, 1], [1, 1, 1, 1], "VALID")
    np.testing.assert_array_equal(
        to_np(patches(x, p)), plain.numpy().reshape(shape[0], -1, p * p * shape[-1])
    )


def test_reference_shifted_patches_by_hand():
    x = np.arange(1, 17, dtype="float32").reshape(1, 4, 4, 1)
    out = reference_shifted_patches(x, 2)  # h = 1; 4 patches of 2x2x5
    stack = out[0, 0].reshape(2, 2, 5)  # top-left patch
    np.testing.assert_array_equal(stack[..., 0], [[1, 2], [5, 6]])  # original
    np.testing.assert_array_equal(stack[..., 1], [[6, 7], [10, 11]])  # left-up x[i+1, j+1]
    np.testing.assert_array_equal(stack[..., 2], [[0, 0], [2, 3]])  # left-down x[i-1, j+1]
    np.testing.assert_array_equal(stack[..., 3], [[0, 5], [0, 9]])  # right-up x[i+1, j-1]
    np.testing.assert_array_equal(stack[..., 4], [[0, 0], [0, 1]])  # right-down x[i-1, j-1]


def test_patches_reject_indivisible_sizes():
    x = np.zeros((1, 10, 12, 3), "float32")
    with pytest.raises(ValueError, match="divisible"):
        shifted_patches(x, 4)
    with pytest.raises(ValueError, match="divisible"):
        patches(x, 4)


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize(
    ("shape", "patch_size", "dim"), [((2, 72, 72, 3), 6, 64), ((3, 8, 12, 2), 4, 16)]
)
@pytest.mark.parametrize("vanilla", [False, True])
def test_spt_layer_matches_numpy(shape, patch_size, dim, vanilla):
    g = rng(1)
    x = g.standard_normal(shape).astype("float32")
    layer = ShiftedPatchTokenization(patch_size, dim, vanilla=vanilla)
    layer.build(shape)
    layer.set_weights([g.standard_normal(w.shape).astype("float32") * 0.1 for w in layer.weights])
    got = to_np(layer(x))
    x64 = x.astype("float64")
    if vanilla:
        p = patch_size
        tokens = reference_shifted_patches(x64, p)
        # the first C channels of each pixel in the shifted stack are the original image
        tokens = tokens.reshape(*tokens.shape[:2], p * p, 5, shape[-1])[..., 0, :]
        tokens = tokens.reshape(*tokens.shape[:2], -1)
    else:
        ln = layer.layer_norm
        tokens = _layer_norm(
            reference_shifted_patches(x64, patch_size),
            to_np(ln.gamma).astype("float64"),
            to_np(ln.beta).astype("float64"),
            layer.epsilon,
        )
    kernel, bias = (to_np(w).astype("float64") for w in layer.projection.weights)
    np.testing.assert_allclose(got, tokens @ kernel + bias, atol=1e-5, rtol=0)


# --- Attention --------------------------------------------------------------------------


def _random_attention(cls, shape, num_heads, key_dim, seed=2, dropout=0.0):
    layer = cls(num_heads, key_dim, dropout=dropout)
    layer.build(shape)
    g = rng(seed)
    for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense):
        dense.bias.assign(g.standard_normal(dense.bias.shape).astype("float32") * 0.1)
    return layer


def _reference_for(layer, x, locality):
    args = []
    for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense):
        args += [to_np(dense.kernel), to_np(dense.bias)]
    tau = float(to_np(layer.tau)) if locality else None
    return reference_self_attention(
        x, *args, layer.num_heads, layer.key_dim, tau=tau, locality=locality
    )


ATTENTION_CASES = [
    ((2, 16, 64), 4, 16),
    ((1, 144, 64), 4, 64),  # LSA seed shape: 144 tokens, dim 64, 4 heads, key_dim 64
    ((3, 7, 24), 2, 8),  # odd token count
    ((2, 5, 12), 1, 12),
]


LSA_CLASSES = [LocalitySelfAttention, AdditiveMaskLocalitySelfAttention]


@pytest.mark.parametrize(("shape", "num_heads", "key_dim"), ATTENTION_CASES)
@pytest.mark.parametrize("cls", [SelfAttention, *LSA_CLASSES])
def test_attention_matches_reference(cls, shape, num_heads, key_dim):
    locality = cls.locality
    layer = _random_attention(cls, shape, num_heads, key_dim, dropout=0.3)
    if locality:
        layer.tau.assign(math.sqrt(key_dim) * 0.7)  # a trained temperature, not the init
    x = rng(3).standard_normal(shape).astype("float32")
    out, scores = layer(x, return_attention_scores=True, training=False)
    ref_out, ref_scores = _reference_for(layer, x, locality)
    assert to_np(scores).shape == (shape[0], num_heads, shape[1], shape[1])
    np.testing.assert_allclose(to_np(scores), ref_scores, atol=1e-5, rtol=0)
    np.testing.assert_allclose(to_np(out), ref_out, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(to_np(layer(x)), to_np(out))


@pytest.mark.parametrize(("shape", "num_heads", "key_dim"), ATTENTION_CASES)
def test_lsa_training_step_matches_reference(shape, num_heads, key_dim):
    layer = _random_attention(LocalitySelfAttention, shape, num_heads, key_dim)
    layer.tau.assign(math.sqrt(key_dim) * 0.7)
    x = rng(3).standard_normal(shape).astype("float32")
    out, scores = layer(x, return_attention_scores=True, training=True)
    ref_out, ref_scores = _reference_for(layer, x, locality=True)
    assert np.diagonal(to_np(scores), axis1=-2, axis2=-1).max() == 0.0
    np.testing.assert_allclose(to_np(scores), ref_scores, atol=1e-5, rtol=0)
    np.testing.assert_allclose(to_np(out), ref_out, atol=1e-5, rtol=0)


def test_lsa_training_gradients_equal_inference_formulation():
    layer = _random_attention(LocalitySelfAttention, (2, 16, 32), 4, 8)
    x = rng(4).standard_normal((2, 16, 32)).astype("float32")
    grads = [
        layer_gradients(layer, x, _square_sum, training=training, weights=layer.trainable_weights)
        for training in (False, True)
    ]
    for inference, training in zip(*grads, strict=True):
        np.testing.assert_allclose(training, inference, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("scale", [3.0, 3e4])  # 3e4: scores far beyond a -1e4 fill
@pytest.mark.parametrize("cls", LSA_CLASSES)
def test_lsa_scores_mask_diagonal_and_normalise(cls, scale):
    layer = _random_attention(cls, (2, 144, 64), 4, 64)
    x = rng(4).standard_normal((2, 144, 64)).astype("float32") * scale
    _, scores = layer(x, return_attention_scores=True)
    scores = to_np(scores).astype("float64")
    assert np.isfinite(scores).all()
    assert np.abs(np.diagonal(scores, axis1=-2, axis2=-1)).max() < 1e-12
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)


def test_lsa_tau_is_trainable_with_sqrt_key_dim_init():
    layer = LocalitySelfAttention(4, 64)
    layer.build((None, 16, 64))
    assert any(w is layer.tau for w in layer.trainable_weights)
    assert layer.tau.shape == ()
    assert float(to_np(layer.tau)) == pytest.approx(8.0)
    plain = SelfAttention(4, 64)
    plain.build((None, 16, 64))
    assert not any("tau" in w.path for w in plain.weights)


def test_attention_dropout_only_in_training():
    layer = _random_attention(SelfAttention, (2, 16, 32), 4, 8, dropout=0.5)
    x = rng(5).standard_normal((2, 16, 32)).astype("float32")
    assert np.array_equal(to_np(layer(x)), to_np(layer(x, training=False)))
    assert not np.allclose(to_np(layer(x, training=True)), to_np(layer(x)))


@pytest.mark.parametrize("cls", LSA_CLASSES)
def test_lsa_mixed_float16(cls):
    layer = cls(4, 16, dtype="mixed_float16")
    x = rng(6).standard_normal((2, 16, 32)).astype("float32")
    out, scores = layer(x, return_attention_scores=True)
    dtype = keras.backend.standardize_dtype
    assert dtype(out.dtype) == "float16" and dtype(scores.dtype) == "float16"
    assert layer.tau.dtype == "float32"
    out, scores = to_np(out).astype("float64"), to_np(scores).astype("float64")
    assert np.isfinite(out).all() and np.isfinite(scores).all()
    assert np.diagonal(scores, axis1=-2, axis2=-1).max() == 0.0
    ref_out, ref_scores = _reference_for(layer, x, locality=True)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-2)
    np.testing.assert_allclose(out, ref_out, atol=2e-2)


# --- DropPath and MLP -------------------------------------------------------------------


def test_drop_path_identity_at_inference():
    x = rng(7).standard_normal((4, 6, 6, 3)).astype("float32")
    layer = DropPath(0.5, seed=1)
    np.testing.assert_array_equal(to_np(layer(x)), x)
    np.testing.assert_array_equal(to_np(layer(x, training=False)), x)


def test_drop_path_training_drops_whole_samples():
    rate, n = 0.3, 4000
    x = rng(8).uniform(1.0, 2.0, (n, 4, 4)).astype("float32")  # nonzero everywhere
    out = to_np(DropPath(rate, seed=1)(x, training=True))
    kept = np.all(out != 0, axis=(1, 2))
    dropped = np.all(out == 0, axis=(1, 2))
    assert np.all(kept | dropped)
    np.testing.assert_allclose(out[kept], x[kept] / (1 - rate), rtol=1e-6)
    assert abs(kept.mean() - (1 - rate)) < 0.03


@pytest.mark.parametrize("jit", [False, True], ids=["eager-or-tf-kernels", "compiled"])
def test_dropout_drops_elements_at_its_rate_and_scales_the_rest(jit):
    rate, shape = 0.2, (50, 100, 40)  # 200k elements: the kept share is within 0.005 (5 sigma)
    x = rng(10).uniform(1.0, 2.0, shape).astype("float32")  # nonzero everywhere
    layer = Dropout(rate, seed=4)
    layer.build(shape)
    step = training_calls(layer, jit)
    out = step(x)
    kept = out != 0
    assert abs(kept.mean() - (1 - rate)) < 0.005
    np.testing.assert_allclose(out[kept], x[kept] / (1 - rate), rtol=1e-6)
    assert not np.array_equal(step(x) != 0, kept)  # a new mask every call
    np.testing.assert_array_equal(to_np(layer(x)), x)  # inference: identity
    np.testing.assert_array_equal(to_np(layer(x, training=False)), x)


def test_dropout_gradient_is_the_scaled_mask():
    x = rng(11).uniform(1.0, 2.0, (20, 30)).astype("float32")
    layer = Dropout(0.5, seed=5)
    upstream = np.ones_like(x)
    (grad,) = layer_gradients(layer, x, lambda y: ops.sum(ops.multiply(y, upstream)), training=True)
    # the mask of that call: the same seed state again gives the same mask
    layer_again = Dropout(0.5, seed=5)
    y = training_calls(layer_again, jit=False)(x)
    np.testing.assert_array_equal(grad, np.where(y != 0, 2.0, 0.0))


def test_mlp_structure_and_values():
    layer = MLP([8, 6], dropout=0.5, activate_last=False)
    x = rng(9).standard_normal((3, 5)).astype("float32")
    out = to_np(layer(x))  # inference: no dropout
    (k1, b1), (k2, b2) = (
        (to_np(d.kernel).astype("float64"), to_np(d.bias).astype("float64"))
        for d in layer.dense_layers
    )
    erf = np.vectorize(math.erf)
    hidden = x @ k1 + b1
    hidden = 0.5 * hidden * (1 + erf(hidden / math.sqrt(2)))
    np.testing.assert_allclose(out, hidden @ k2 + b2, atol=1e-5)
    assert layer.dense_layers[0].activation is gelu
    assert layer.dense_layers[1].activation is not gelu
    assert MLP([8, 6]).dense_layers[1].activation is gelu
