"""TFLite through tf.lite.TFLiteConverter from a SavedModel with the `serving_default` signature."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from export.signature import INPUT_NAME, SIGNATURE_KEY, input_spec, serving_call
from export.source import ExportSource
from toolkit.native_logs import captured_native_stderr


@dataclass(frozen=True)
class Recipe:
    """Converter settings of one TFLite format."""

    optimize: bool = False  # optimizations = [Optimize.DEFAULT]
    float16: bool = False  # supported_types = [tf.float16]
    int8: bool = False  # representative dataset + TFLITE_BUILTINS_INT8 only
    int8_io: bool = False  # int8 input and output tensors instead of float32


FP32 = Recipe()
FP16 = Recipe(optimize=True, float16=True)
DYNAMIC = Recipe(optimize=True)
INT8 = Recipe(optimize=True, int8=True, int8_io=True)
INT8_FLOAT_IO = Recipe(optimize=True, int8=True)


def saved_model(src: ExportSource) -> Path:
    """The run's model as a SavedModel with signature serving_default(image) -> {logits}."""

    def write() -> Path:
        folder = Path(src.scratch) / "saved_model"
        archive = keras.export.ExportArchive()
        archive.track(src.model)
        archive.add_endpoint(
            SIGNATURE_KEY, serving_call(src.model), input_signature=[input_spec(src.input_shape)]
        )
        with captured_native_stderr():
            archive.write_out(str(folder), verbose=False)
        return folder

    return src.memo("saved_model", write)


def representative_dataset(images: np.ndarray) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
    """One calibration image at a time, keyed by the signature's input name."""

    def generate() -> Iterator[dict[str, np.ndarray]]:
        for i in range(len(images)):
            yield {INPUT_NAME: images[i : i + 1]}

    return generate


def convert_tflite(src: ExportSource, path: Path, recipe: Recipe) -> None:
    """Convert with builtin ops only (int8 builtins for the int8 recipes) and write `path`."""
    converter = tf.lite.TFLiteConverter.from_saved_model(
        str(saved_model(src)), signature_keys=[SIGNATURE_KEY]
    )
    builtins = (
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if recipe.int8 else tf.lite.OpsSet.TFLITE_BUILTINS
    )
    converter.target_spec.supported_ops = [builtins]
    if recipe.optimize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if recipe.float16:
        converter.target_spec.supported_types = [tf.float16]
    if recipe.int8:
        converter.representative_dataset = representative_dataset(src.calibration)
    if recipe.int8_io:
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    with captured_native_stderr(), warnings.catch_warnings():
        # the converter's own calibrator uses tf.lite.Interpreter and warns about it
        warnings.filterwarnings("ignore", message=r".*tf\.lite\.Interpreter is deprecated")
        flatbuffer = converter.convert()
    path.write_bytes(flatbuffer)


def tflite_converter(recipe: Recipe) -> Callable[[ExportSource, Path], None]:
    """The FORMATS converter for one recipe."""

    def convert(src: ExportSource, path: Path) -> None:
        convert_tflite(src, path, recipe)

    return convert
