"""Int8 attribution: which layer of the int8 TFLite model loses accuracy, per TFLite's debugger.

`tf.lite.experimental.QuantizationDebugger` re-quantizes the run's model with the converter
settings of `toolkit export --format tflite-int8` (same calibration images) in debug mode:
a NumericVerify op after every quantized tensor compares it with the float tensor on each
debug image. Per layer it reports the error statistics, and rmse/scale = RMSE of the
int8-vs-float difference in units of that tensor's quantization step: pure rounding gives
1/sqrt(12) ~ 0.29; a layer far above that (clipping, a range stretched by outliers, a
coarse softmax grid) is where accuracy is lost. The debugger runs its own debug model in
TensorFlow's interpreter (NumericVerify is not a LiteRT builtin); nothing else here does.
"""

from __future__ import annotations

import csv
import io
import math
import time
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import tensorflow as tf

from toolkit.common.native_logs import captured_native_stderr
from toolkit.export.calibration import calibration_images
from toolkit.export.signature import SIGNATURE_KEY
from toolkit.export.source import open_source
from toolkit.export.tflite import representative_dataset, saved_model
from toolkit.formats import FORMATS
from toolkit.runfiles import Manifest
from toolkit.runfiles.folder import Run
from toolkit.runmodel import load_run_model

ROUNDING_RMSE = 1 / math.sqrt(12)  # rmse/scale of uniform rounding error
TOP = 10


def int8_formats() -> list[str]:
    """The formats whose rows in toolkit/formats.py ask for the int8 attribution."""
    return [name for name, f in FORMATS.items() if f.int8_attribution]


def _debug_dataset(images: np.ndarray) -> Callable[[], Iterator[list[np.ndarray]]]:
    """One image per step, as the debugger's positional input list."""

    def generate() -> Iterator[list[np.ndarray]]:
        for i in range(len(images)):
            yield [images[i : i + 1]]

    return generate


def _converter(src, calibration: np.ndarray) -> tf.lite.TFLiteConverter:
    """The tflite-int8 recipe of export/tflite.py (int8 builtins, representative dataset)."""
    converter = tf.lite.TFLiteConverter.from_saved_model(
        str(saved_model(src)), signature_keys=[SIGNATURE_KEY]
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative_dataset(calibration)
    return converter


def _rows(debugger) -> list[dict]:
    """The debugger's per-layer CSV dump as dicts with numbers, plus rmse/scale."""
    buffer = io.StringIO()
    debugger.layer_statistics_dump(buffer)
    rows = []
    for raw in csv.DictReader(io.StringIO(buffer.getvalue())):
        row: dict = {"op_name": raw.pop("op_name"), "tensor_name": raw.pop("tensor_name")}
        for key, value in raw.items():
            number = float(value) if value not in ("", None) else math.nan
            row[key] = int(number) if key in ("tensor_idx", "zero_point") else number
        scale, mse = row.get("scale", math.nan), row.get("mean_squared_error", math.nan)
        row["rmse/scale"] = math.sqrt(mse) / scale if scale and scale > 0 else math.nan
        rows.append(
            {
                k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in row.items()
            }
        )
    return rows


def attribute_int8(run: Run, manifest: Manifest, images: np.ndarray, samples: int) -> dict:
    """Per-layer int8 error of the run's model on `images[:samples]`, ranked by rmse/scale."""
    start = time.perf_counter()
    entry = next(manifest.artifacts[f] for f in int8_formats() if f in manifest.artifacts)
    options = entry.options
    model = load_run_model(run)
    input_shape = tuple(int(d) for d in model.input_shape[1:])
    calib_samples = int(options.get("calib_samples") or 500)
    calibration = calibration_images(run, input_shape, options.get("calib_data"), calib_samples)
    debug_images = images[:samples].astype(np.float32)
    with open_source(run, model, opset=17, calib_data=None, calib_samples=calib_samples) as src:
        with captured_native_stderr(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*tf\.lite\.Interpreter is deprecated")
            warnings.filterwarnings("ignore", message=r".*Statistics for quantized inputs")
            debugger = tf.lite.experimental.QuantizationDebugger(
                converter=_converter(src, calibration),
                debug_dataset=_debug_dataset(debug_images),
            )
            debugger.run()
    rows = sorted(_rows(debugger), key=lambda r: -(r["rmse/scale"] or 0.0))
    return {
        "method": "tf.lite.experimental.QuantizationDebugger (layer_statistics)",
        "artifact_recipe": "tflite-int8 converter settings",
        "calibration": {"data": options.get("calib_data"), "samples": calib_samples},
        "debug_samples": len(debug_images),
        "metric": "rmse/scale = sqrt(mean_squared_error) / scale; rounding alone gives 0.29",
        "layers": rows,
        "top": rows[:TOP],
        "seconds": round(time.perf_counter() - start, 1),
    }
