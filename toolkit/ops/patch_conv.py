"""Patch convolution: a Conv2D whose kernel equals its stride (patch embedding, patch merging)."""

import keras
import numpy as np

from toolkit.ops.patches import patches


@keras.saving.register_keras_serializable(package="toolkit")
class PatchConv2D(keras.layers.Conv2D):
    """Conv2D over non-overlapping patch_size x patch_size patches (kernel == stride).

    Inference (and so every export) is the plain convolution. The training step computes the
    same sums as pad + patches + one matmul with the same (k, k, C, F) kernel, because TF's CPU
    gradient of a strided convolution (Conv2DBackpropInput) is slow for these shapes.
    """

    def __init__(
        self,
        filters: int,
        patch_size: int,
        padding: str = "same",
        use_bias: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(
            filters, patch_size, strides=patch_size, padding=padding, use_bias=use_bias, **kwargs
        )
        self.patch_size = patch_size

    def call(self, inputs: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """The convolution; in training, the same sums as patches @ kernel."""
        if not training:
            return super().call(inputs)
        k = self.kernel_size[0]
        _, height, width, channels = inputs.shape
        pad_h, pad_w = (-height % k, -width % k) if self.padding == "same" else (0, 0)
        if pad_h or pad_w:  # "same": the extra half (rounded up) goes at the end
            pads = [[0, 0], [pad_h // 2, pad_h - pad_h // 2], [pad_w // 2, pad_w - pad_w // 2]]
            inputs = keras.ops.pad(inputs, [*pads, [0, 0]])
        rows, cols = (height + pad_h) // k, (width + pad_w) // k
        if self.padding == "valid":
            inputs = inputs[:, : rows * k, : cols * k, :]
        flat = patches(inputs, k)  # (N, rows * cols, k * k * C) in the kernel's (dy, dx, c) order
        y = keras.ops.matmul(flat, keras.ops.reshape(self.kernel, (k * k * channels, -1)))
        if self.use_bias:
            y = y + self.bias
        y = keras.ops.reshape(y, (-1, rows, cols, self.filters))
        return y

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {
            **keras.layers.Layer.get_config(self),
            "filters": self.filters,
            "patch_size": self.patch_size,
            "padding": self.padding,
            "use_bias": self.use_bias,
        }


def reference_patch_conv(
    x: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None, padding: str = "same"
) -> np.ndarray:
    """NumPy float64 convolution with stride == kernel size on NHWC, from its definition.

    out[n, i, j, f] = sum over dy, dx, c of x[n, i*k + dy, j*k + dx, c] * kernel[dy, dx, c, f];
    "same" zero-pads up to a multiple of k, half before (rounded down) and the rest after,
    "valid" drops the incomplete last row and column of patches.
    """
    x = np.asarray(x, np.float64)
    kernel = np.asarray(kernel, np.float64)
    k = kernel.shape[0]
    if padding == "same":
        pad_h, pad_w = -x.shape[1] % k, -x.shape[2] % k
        x = np.pad(
            x, [(0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)]
        )
    n, h, w, _ = x.shape
    rows, cols = h // k, w // k
    padded = x
    out = np.zeros((n, rows, cols, kernel.shape[3]))
    for i in range(rows):
        for j in range(cols):
            window = padded[:, i * k : (i + 1) * k, j * k : (j + 1) * k, :]
            out[:, i, j] = np.einsum("nyxc,yxcf->nf", window, kernel)
    return out if bias is None else out + np.asarray(bias, np.float64)
