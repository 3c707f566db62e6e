"""Run on JAX (KERAS_BACKEND=jax): a `paper-cifar`-shaped device-resident training (the ViT-LSA
recipe's pieces, a narrow model so a CPU compiles it in seconds), its steps after the first
under JAX's transfer guards, and its compiled step searched for host callbacks. Prints one
JSON line: per mode, {"steps": N, "guarded": N, "host_callbacks": [...], "error": "..." or null}.

    python tests/without_tensorflow.py -m transfer_guard_check [MODE ...]

MODE: none (default), host-round-trip or debug-callback.

`host-round-trip` reads each step's loss into NumPy and writes a value from it back to the
device (what a host-side schedule setting the learning rate every step would do);
`debug-callback` puts a `jax.debug.callback` into the model. Both must be caught: the first by
the guard, the second in the compiled program.

On the CPU a device-to-host read is no transfer (a CPU array lives in host memory: the guard
does not fire on `np.asarray`, measured with JAX 0.10.2), so a read alone is caught on an
accelerator only; its way back to the device is caught here.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from dataclasses import replace

import jax
import keras
import numpy as np

from toolkit.data import load_data
from toolkit.models import get_preset
from toolkit.training.device_data import device_trainer
from toolkit.training.train import compile_model, device_resident, mixing

# what a compiled program calls on the host: JAX's Python callbacks (jax.debug.callback,
# jax.pure_callback, io_callback) lower to custom calls with these targets
HOST_CALL = re.compile(r'custom_call_target="([^"]*(?:callback|host)[^"]*)"', re.IGNORECASE)
BATCH = 16


class HostPrint(keras.layers.Layer):
    """Identity that sends its input's mean to the host every call: a host round trip."""

    def call(self, x):
        jax.debug.callback(lambda m: None, keras.ops.mean(x))
        return x


class Guard(keras.callbacks.Callback):
    """Every step after the first (which compiles and uploads) runs under the guards: no
    transfer from the device to the host or between devices. The host-to-device direction
    stays allowed for one reason: the step's input is its batch of indices, drawn on the host
    (IndexBatches, BATCH x 4 bytes a step); the images, labels, augmentation and mixing are
    already on the device."""

    def __init__(self) -> None:
        super().__init__()
        self.stack = contextlib.ExitStack()
        self.steps = self.guarded = 0

    def on_train_batch_begin(self, batch, logs=None) -> None:
        if self.steps >= 1:
            self.stack.enter_context(jax.transfer_guard_device_to_host("disallow"))
            self.stack.enter_context(jax.transfer_guard_device_to_device("disallow"))
            self.stack.enter_context(jax.transfer_guard_host_to_device("disallow"))
            self.guarded += 1

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.stack.close()
        self.steps += 1


class HostRoundTrip(keras.callbacks.Callback):
    """Reads the step's loss into NumPy and writes it back to a device variable as the step
    ends (placed before Guard: inside the guarded step)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_loss = keras.Variable(0.0, trainable=False)

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.last_loss.assign(np.asarray(logs["loss"]) * 1.0)


def _preset():
    preset = get_preset("vit-lsa", "paper-cifar")
    arch = replace(
        preset.arch, dim=48, depth=1, num_heads=3, key_dim=16, mlp_units=(96, 48), drop_path=0.1
    )
    return replace(preset, arch=arch, train=replace(preset.train, batch_size=BATCH, epochs=1))


def host_callbacks(fit_model: keras.Model, batch: np.ndarray) -> list[str]:
    """The host-callback custom calls in the compiled train step (Keras' public
    `train_step(state, data)` of the JAX trainer, jitted as `fit` jits it)."""
    state = (
        [v.value for v in fit_model.trainable_variables],
        [v.value for v in fit_model.non_trainable_variables],
        [v.value for v in fit_model.optimizer.variables],
        [v.value for v in fit_model.metrics_variables],
    )
    text = jax.jit(fit_model.train_step).lower(state, (batch,)).compile().as_text()
    return sorted(set(HOST_CALL.findall(text)))


def main(inject: str) -> dict:
    keras.utils.set_random_seed(0)
    # On an accelerator Keras' JAX iterator uploads each batch explicitly (jax.device_put, one
    # batch ahead); on the CPU it hands the step NumPy, an implicit upload the host-to-device
    # guard refuses. A data-parallel distribution over the one CPU device makes the iterator
    # upload explicitly (distribute_data_input) as it does on a GPU, so the guard can refuse
    # every implicit upload.
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()[:1]))
    preset = _preset()
    data = load_data("shapes:160", seed=0)
    batches, model, fit_model = device_resident(preset, data, None, seed=0)
    if inject == "debug-callback":  # the same model with a host round trip in its forward pass
        inputs = keras.Input(model.input_shape[1:])
        recipe = preset.train
        fit_model = device_trainer(
            keras.Model(inputs, model(HostPrint()(inputs))),
            data.x_train,
            data.y_train,
            data.num_classes,
            recipe.augmentation,
            mixing(recipe, data.num_classes),
            0,
            recipe.rand_augment,
        )
    compile_model(fit_model, preset, len(batches), True)
    guard = Guard()
    callbacks = ([HostRoundTrip()] if inject == "host-round-trip" else []) + [guard]
    error = None
    try:
        fit_model.fit(batches, epochs=1, steps_per_epoch=4, callbacks=callbacks, verbose=0)
    except Exception as exc:  # noqa: BLE001 - the guard's error is the result
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    finally:  # a step the guard stopped never reached its end
        guard.stack.close()
    calls = host_callbacks(fit_model, np.arange(BATCH, dtype=np.int32))
    return {"steps": guard.steps, "guarded": guard.guarded, "host_callbacks": calls, "error": error}


if __name__ == "__main__":
    print(json.dumps({mode: main(mode) for mode in sys.argv[1:] or ["none"]}))
