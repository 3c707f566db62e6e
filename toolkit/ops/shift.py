"""ShiftViT partial shift: four channel groups move one way each, the rest stay."""

import keras
import numpy as np


def _shift_axis(
    group: keras.KerasTensor, axis: int, size: int | None, step: int
) -> keras.KerasTensor:
    """Move `group` by `step` along `axis` (negative: toward index 0) and zero-fill the gap."""
    if size is not None and abs(step) >= size:
        return keras.ops.zeros_like(group)
    pads = [[0, 0]] * 4
    index = [slice(None)] * 4
    if step < 0:  # out[i] = x[i + s]: drop the first s, zeros enter at the end
        index[axis] = slice(-step, None)
        pads[axis] = [0, -step]
    else:  # out[i] = x[i - s]: drop the last s, zeros enter at the start
        index[axis] = slice(None, -step)
        pads[axis] = [step, 0]
    return keras.ops.pad(group[tuple(index)], pads)


def _read_offsets(s: int) -> list[tuple[int, int]]:
    """Where each moved group reads, as (row, col) in x padded by s on each side (equally: the
    tap of a (2s+1)-square kernel): left reads x[h, w + s], right x[h, w - s], up x[h + s, w],
    down x[h - s, w]."""
    return [(s, 2 * s), (s, 0), (2 * s, s), (0, s)]


@keras.saving.register_keras_serializable(package="toolkit")
class PartialShift(keras.layers.Layer):
    """Shift channel groups left, right, up and down (ShiftViT, official code); NHWC.

    With g = C // num_div: [0,g) left, [g,2g) right, [2g,3g) up, [3g,4g) down, rest unchanged.
    """

    def __init__(self, num_div: int = 12, shift_pixel: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        if num_div < 1 or shift_pixel < 1:
            raise ValueError(
                f"num_div and shift_pixel must be >= 1, got {num_div} and {shift_pixel}"
            )
        self.num_div = num_div
        self.shift_pixel = shift_pixel

    def call(self, x: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """Apply the four shifts with slices, zero pads and one concatenate.

        Inference (and so every export) pads once and cuts each group as one strided window of
        channels and pixels: no channel split, which becomes SPLIT_V in TFLite, which XNNPACK
        does not take, and few ops, since each op costs a runtime dispatch at batch 1.
        The training step splits the channels once instead: its gradient is a single
        concatenate, where each slice's gradient is a full-size zero buffer summed with the
        others. Both give the same values.
        """
        _, height, width, channels = x.shape
        g = channels // self.num_div
        if g == 0:
            return x
        s = self.shift_pixel
        bounds = [min(i * g, channels) for i in (1, 2, 3, 4)]  # num_div < 4: empty groups
        if training:
            groups = keras.ops.split(x, bounds, axis=-1)
            moves = [(2, width, -s), (2, width, s), (1, height, -s), (1, height, s)]
            parts = [_shift_axis(grp, *move) for grp, move in zip(groups, moves, strict=False)]
            rest = groups[4]
        else:  # one zero pad; each group is a window of it, which past an edge reads the pad
            padded = keras.ops.pad(x, [[0, 0], [s, s], [s, s], [0, 0]])
            shape = keras.ops.shape(x)  # ints where static, else tensors
            rows, cols = height or shape[1], width or shape[2]
            starts = [0, *bounds[:3]]
            parts = [
                padded[:, r : r + rows, c : c + cols, a:b]
                for (r, c), a, b in zip(_read_offsets(s), starts, bounds, strict=True)
            ]
            rest = x[..., 4 * g :]
        if 4 * g < channels:
            parts.append(rest)
        return keras.ops.concatenate(parts, axis=-1)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """The shift keeps the shape."""
        return tuple(input_shape)

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {**super().get_config(), "num_div": self.num_div, "shift_pixel": self.shift_pixel}


def reference_partial_shift(x: np.ndarray, num_div: int, shift_pixel: int) -> np.ndarray:
    """NumPy partial shift on NHWC written from the official ShiftViT code (slice assignment)."""
    n, h, w, c = x.shape
    g = c // num_div
    s = shift_pixel
    out = np.zeros_like(x)
    if s < w:
        out[:, :, : w - s, 0:g] = x[:, :, s:, 0:g]  # left: out[w] = x[w + s]
        out[:, :, s:, g : 2 * g] = x[:, :, : w - s, g : 2 * g]  # right: out[w] = x[w - s]
    if s < h:
        out[:, : h - s, :, 2 * g : 3 * g] = x[:, s:, :, 2 * g : 3 * g]  # up: out[h] = x[h + s]
        out[:, s:, :, 3 * g : 4 * g] = x[:, : h - s, :, 3 * g : 4 * g]  # down: out[h] = x[h - s]
    out[..., 4 * g :] = x[..., 4 * g :]
    return out


def shift_kernel(channels: int, num_div: int, shift_pixel: int) -> np.ndarray:
    """The partial shift as a depthwise kernel (2s+1, 2s+1, C, 1): one 1 per channel, at the
    tap that channel reads (cross-correlation: out[h, w] = x[h + i - s, w + j - s] at tap i, j)."""
    g = channels // num_div
    s = shift_pixel
    kernel = np.zeros((2 * s + 1, 2 * s + 1, channels, 1), np.float32)
    kernel[s, s, 4 * g :] = 1.0  # the rest stay
    for k, (i, j) in enumerate(_read_offsets(s)):
        kernel[i, j, k * g : (k + 1) * g] = 1.0
    return kernel


@keras.saving.register_keras_serializable(package="toolkit")
class DepthwisePartialShift(PartialShift):
    """PartialShift (same arguments, same values) as one depthwise convolution with one-hot
    kernels and zero padding: 1 TFLite op instead of a pad, up to 5 slices and a concatenate,
    each of which costs XNNPACK a dispatch at batch 1. Exact in float: every output is one input
    times 1 plus zeros; exact in int8 too once the export gives its output its input's range.
    The TFLite export swaps it in (toolkit.export.tflite, `pin_shift_ranges`)."""

    def call(self, x: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """One depthwise convolution over the channels, 'same' zero padding."""
        if x.shape[-1] // self.num_div == 0:
            return x
        kernel = shift_kernel(x.shape[-1], self.num_div, self.shift_pixel)
        kernel = keras.ops.convert_to_tensor(kernel, dtype=x.dtype)
        return keras.ops.depthwise_conv(x, kernel, strides=1, padding="same")
