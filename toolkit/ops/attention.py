"""Multi-head self-attention and Locality Self-Attention (LSA, Lee et al. 2021).

Written from Dense, reshape, transpose, matmul and softmax so it exports to TFLite builtins and
standard ONNX with a dynamic batch.
"""

import math

import keras
import numpy as np

from toolkit.ops.dropout import Dropout


def mask_diagonal_softmax(scores: keras.KerasTensor, eye: keras.KerasTensor) -> keras.KerasTensor:
    """Softmax over each row without its diagonal entry: the same weights as a -inf mask.

    The diagonal is first filled with the row's smallest score, a finite value that keeps the
    scores' range (and so an int8 scale) unchanged and cannot overflow in float16, then its
    weight is zeroed and the row renormalised, which cancels the fill exactly. The row max
    stays in the sum, so the division never sees 0.
    """
    keep = 1.0 - eye
    low = keras.ops.min(scores, axis=-1, keepdims=True)
    weights = keras.ops.softmax(scores * keep + eye * low, axis=-1) * keep
    return weights / keras.ops.sum(weights, axis=-1, keepdims=True)


DIAGONAL_FILL = float(np.finfo(np.float32).min)
DIAGONAL_MASK_SCOPE = "diagonal_mask"  # name scope of the additive mask's ops in exported graphs


def additive_diagonal_softmax(
    scores: keras.KerasTensor, eye: keras.KerasTensor
) -> keras.KerasTensor:
    """Softmax over each row after adding float32's lowest value on the diagonal: the weights
    of a -inf mask in 2 ops (Add, Softmax) where `mask_diagonal_softmax` takes 8.

    The fill would stretch an int8 scale to nothing, so the ops sit in the name scope
    DIAGONAL_MASK_SCOPE, which int8 recipes keep float. In float16 the fill becomes -inf, whose
    weight is still exactly 0.
    """
    with keras.name_scope(DIAGONAL_MASK_SCOPE):
        fill = keras.ops.cast(keras.ops.cast(eye, "float32") * DIAGONAL_FILL, scores.dtype)
        return keras.ops.softmax(scores + fill, axis=-1)


TRAINING_DIAGONAL_FILL = -1e4


def training_diagonal_bias(tokens: int, dtype: str) -> keras.KerasTensor:
    """(T, T) additive mask for the training step: -1e4 on the diagonal, 0 elsewhere.

    exp(-1e4) underflows to exactly 0 in float32, float16 and bfloat16, so the softmax gives
    the weights of `mask_diagonal_softmax` at a fraction of its cost in the backward pass.
    Inference keeps `mask_diagonal_softmax`: a -1e4 entry would stretch an int8 scale.
    """
    bias = np.where(np.eye(tokens, dtype=bool), TRAINING_DIAGONAL_FILL, 0.0)
    return keras.ops.convert_to_tensor(bias, dtype=dtype)


@keras.saving.register_keras_serializable(package="toolkit")
class SelfAttention(keras.layers.Layer):
    """Plain multi-head self-attention with scores q.k^T / sqrt(key_dim).

    Call as layer(x, return_attention_scores=False, training=None) on (N, T, D) tokens.
    `qkv_bias=False`: query, key and value projections without bias (the SPT/LSA paper's code).
    `temperature` is LSA's (LocalitySelfAttention): "shared", one learned temperature `tau`
    dividing the scores (keras.io's example); "per_head", one learned `scale` per head
    multiplying them, initialised to key_dim ** -0.5 (the paper's code, models/vit.py).
    """

    locality = False  # LocalitySelfAttention: learned temperature and masked diagonal
    masked_softmax = staticmethod(mask_diagonal_softmax)  # LSA's inference mask
    TEMPERATURES = ("shared", "per_head")

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        dropout: float = 0.0,
        qkv_bias: bool = True,
        temperature: str = "shared",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if temperature not in self.TEMPERATURES or (temperature != "shared" and not self.locality):
            raise ValueError(
                f"temperature {temperature!r}: one of {self.TEMPERATURES}, and 'shared' "
                "unless the attention is LSA"
            )
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.dropout = dropout
        self.qkv_bias = qkv_bias
        self.temperature = temperature
        width = num_heads * key_dim
        self.query_dense, self.key_dense, self.value_dense = (
            keras.layers.Dense(width, use_bias=qkv_bias, dtype=self.dtype_policy, name=name)
            for name in ("query", "key", "value")
        )
        self.output_dense = None  # width of the input, known in build()
        self.attention_dropout = Dropout(dropout, dtype=self.dtype_policy)
        self.tau = None
        self.scale = None

    def build(self, input_shape: tuple) -> None:
        """Build the projections; LSA also creates its temperature (`tau` or `scale`)."""
        dim = input_shape[-1]
        for dense in (self.query_dense, self.key_dense, self.value_dense):
            dense.build(input_shape)
        self.output_dense = keras.layers.Dense(
            dim, dtype=self.dtype_policy, name="attention_output"
        )
        self.output_dense.build((*input_shape[:-1], self.num_heads * self.key_dim))
        if self.locality and self.temperature == "per_head":
            self.scale = self.add_weight(
                name="scale",
                shape=(self.num_heads,),
                initializer=keras.initializers.Constant(1.0 / math.sqrt(self.key_dim)),
                trainable=True,
            )
        elif self.locality:
            self.tau = self.add_weight(
                name="tau",
                shape=(),
                initializer=keras.initializers.Constant(math.sqrt(self.key_dim)),
                trainable=True,
            )

    def split_heads(self, x: keras.KerasTensor, tokens: int | None) -> keras.KerasTensor:
        """(N, T, H*K) -> (N, H, T, K)."""
        if tokens is None:
            shape = (keras.ops.shape(x)[0], -1, self.num_heads, self.key_dim)
        else:
            shape = (-1, tokens, self.num_heads, self.key_dim)
        return keras.ops.transpose(keras.ops.reshape(x, shape), (0, 2, 1, 3))

    def call(
        self,
        x: keras.KerasTensor,
        return_attention_scores: bool = False,
        training: bool | None = None,
    ) -> keras.KerasTensor | tuple[keras.KerasTensor, keras.KerasTensor]:
        """Attend over the tokens of x; optionally also return the post-softmax weights."""
        tokens = x.shape[1]
        q = self.split_heads(self.query_dense(x), tokens)
        k = self.split_heads(self.key_dense(x), tokens)
        v = self.split_heads(self.value_dense(x), tokens)
        if self.scale is not None:  # (H,) -> (1, H, 1, 1): each head's scale
            q = q * keras.ops.reshape(keras.ops.cast(self.scale, q.dtype), (1, -1, 1, 1))
        elif self.locality:
            q = q / keras.ops.cast(self.tau, q.dtype)
        else:
            q = q * (1.0 / math.sqrt(self.key_dim))
        scores = keras.ops.matmul(q, keras.ops.transpose(k, (0, 1, 3, 2)))  # (N, H, T, T)
        if self.locality and training and tokens is not None:
            weights = keras.ops.softmax(scores + training_diagonal_bias(tokens, scores.dtype))
        elif self.locality:
            if tokens is None:
                eye = keras.ops.eye(keras.ops.shape(x)[1], dtype=scores.dtype)
            else:
                eye = keras.ops.convert_to_tensor(np.eye(tokens), dtype=scores.dtype)
            weights = self.masked_softmax(scores, eye)
        else:
            weights = keras.ops.softmax(scores, axis=-1)
        attended = keras.ops.matmul(self.attention_dropout(weights, training=training), v)
        attended = keras.ops.transpose(attended, (0, 2, 1, 3))  # (N, T, H, K)
        if tokens is None:
            merge = (keras.ops.shape(x)[0], -1, self.num_heads * self.key_dim)
        else:
            merge = (-1, tokens, self.num_heads * self.key_dim)
        output = self.output_dense(keras.ops.reshape(attended, merge))
        if return_attention_scores:
            return output, weights
        return output

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "dropout": self.dropout,
            "qkv_bias": self.qkv_bias,
            "temperature": self.temperature,
        }


@keras.saving.register_keras_serializable(package="toolkit")
class LocalitySelfAttention(SelfAttention):
    """LSA: self-attention with a trainable temperature `tau` (init sqrt(key_dim)) and the
    diagonal masked before softmax, so each token attends to the others (Lee et al. 2021)."""

    locality = True


@keras.saving.register_keras_serializable(package="toolkit")
class AdditiveMaskLocalitySelfAttention(LocalitySelfAttention):
    """LSA whose inference mask is `additive_diagonal_softmax`: the same function in 6 fewer
    ops per layer, for exported files that keep the attention core float (toolkit.export.tflite)."""

    masked_softmax = staticmethod(additive_diagonal_softmax)


def reference_self_attention(
    x: np.ndarray,
    wq: np.ndarray,
    bq: np.ndarray,
    wk: np.ndarray,
    bk: np.ndarray,
    wv: np.ndarray,
    bv: np.ndarray,
    wo: np.ndarray,
    bo: np.ndarray,
    num_heads: int,
    key_dim: int,
    tau: float | None = None,
    locality: bool = False,
    head_scale: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """NumPy float64 multi-head self-attention; locality=True excludes the diagonal (LSA).
    Scores are q.k^T / tau (default sqrt(key_dim)), or q.k^T * head_scale[h] when given.

    Returns (output (N, T, D), post-softmax weights (N, heads, T, T)).
    """
    x = np.asarray(x, np.float64)
    n, t, _ = x.shape
    temperature = math.sqrt(key_dim) if tau is None else float(tau)
    if head_scale is not None:  # the paper's per-head scale: as dividing by its inverse
        temperatures = 1.0 / np.asarray(head_scale, np.float64).reshape(num_heads)
    else:
        temperatures = np.full(num_heads, temperature)

    def heads(w: np.ndarray, b: np.ndarray) -> np.ndarray:
        y = x @ np.asarray(w, np.float64) + np.asarray(b, np.float64)
        return y.reshape(n, t, num_heads, key_dim).transpose(0, 2, 1, 3)

    q, k, v = heads(wq, bq), heads(wk, bk), heads(wv, bv)
    weights = np.zeros((n, num_heads, t, t))
    for b in range(n):
        for h in range(num_heads):
            logits = q[b, h] @ k[b, h].T / temperatures[h]
            if locality:
                logits[np.arange(t), np.arange(t)] = -np.inf  # a token never attends to itself
            e = np.exp(logits - logits.max(axis=-1, keepdims=True))
            weights[b, h] = e / e.sum(axis=-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(n, t, num_heads * key_dim)
    return merged @ np.asarray(wo, np.float64) + np.asarray(bo, np.float64), weights
