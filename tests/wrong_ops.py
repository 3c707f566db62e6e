"""Deliberately wrong ops that `toolkit verify` must catch (op level and layer level)."""

import keras

from toolkit.ops import LocalitySelfAttention, PartialShift


@keras.saving.register_keras_serializable(package="toolkit_tests")
class CropPadShift(PartialShift):
    """The keras.io formulation: each group is cropped and padded back at the same offset, so
    nothing moves (only a border line is zeroed)."""

    def call(self, x):
        g, s = x.shape[-1] // self.num_div, self.shift_pixel

        def crop_pad(t, axis: int, offset: int):
            index, pads = [slice(None)] * 4, [[0, 0]] * 4
            index[axis] = slice(offset, offset + t.shape[axis] - s)
            pads[axis] = [offset, s - offset]
            return keras.ops.pad(t[tuple(index)], pads)

        parts = [
            crop_pad(x[..., 0:g], 2, 0),
            crop_pad(x[..., g : 2 * g], 2, s),
            crop_pad(x[..., 2 * g : 3 * g], 1, 0),
            crop_pad(x[..., 3 * g : 4 * g], 1, s),
            x[..., 4 * g :],
        ]
        return keras.ops.concatenate(parts, axis=-1)


@keras.saving.register_keras_serializable(package="toolkit_tests")
class UnmaskedLSA(LocalitySelfAttention):
    """LSA with its learned temperature but without the diagonal mask."""

    def call(self, x, return_attention_scores=False, training=None):
        t = x.shape[1]
        q, k, v = (
            self.split_heads(d(x), t) for d in (self.query_dense, self.key_dense, self.value_dense)
        )
        scores = keras.ops.matmul(q / self.tau, keras.ops.transpose(k, (0, 1, 3, 2)))
        attended = keras.ops.matmul(keras.ops.softmax(scores, axis=-1), v)
        merged = keras.ops.reshape(
            keras.ops.transpose(attended, (0, 2, 1, 3)), (-1, t, self.num_heads * self.key_dim)
        )
        return self.output_dense(merged)
