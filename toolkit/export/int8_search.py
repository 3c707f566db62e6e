"""Accuracy-budgeted int8 search: try a table of recipes, keep the fastest within the budget.

Each candidate is judged on the VALIDATION split of the run's data (never the test split, never
the calibration images, which come from the train split): its top-1 drop in points against the
Keras float model, and its batch-1 p50 latency in its runtime (a `toolkit.runtimes.worker`
process, one thread per core, as `toolkit bench`).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from toolkit.accuracy import MAX_DROP_POINTS, top1, top1_vs_reference
from toolkit.common.atomic import full_disk
from toolkit.common.errors import UsageError, first_line
from toolkit.common.progress import progress
from toolkit.export.onnx import fp32_onnx
from toolkit.export.onnx_int8 import OnnxRecipe, onnx_int8_bytes
from toolkit.export.source import ExportSource
from toolkit.export.tflite import FP32, INT8, Recipe, tflite_bytes
from toolkit.runfiles.data import load_split
from toolkit.runtimes import open_artifact, run_in_chunks
from toolkit.runtimes.base import RuntimeOptions
from toolkit.runtimes.timing import Protocol
from toolkit.runtimes.worker import run_worker

EVAL_BATCH = 64
SEARCH_PROTOCOL = Protocol(warmup=5, runs=300, seconds=1.0)
THREADS = os.cpu_count() or 1  # as `toolkit bench` by default
LATENCY_TIE = 0.05  # p50s this close count as equal when choosing among candidates

# batch 1 (every shape folds); ShiftViT's shift as one exact int8 depthwise convolution
_B1 = dict(optimize=True, int8=True, int8_io=True, batch=1, depthwise_shift=True)
# activation x activation matmuls and softmax; LSA's mask is float by `additive_mask`
_ATTENTION_OPS = ("BATCH_MATMUL", "SOFTMAX")
_FLOAT_NORM_GELU_ATTENTION = dict(
    **_B1,
    float_layers=("LayerNormalization",),
    float_ops=("GELU", *_ATTENTION_OPS),
    additive_mask=True,
)

# candidates of `tflite-int8 --max-accuracy-drop`, cheapest to build first
TFLITE_RECIPES: dict[str, Recipe] = {
    "int8": INT8,
    "int8-b1": Recipe(**_B1),
    "int8-b1-float-norm": Recipe(**_B1, float_layers=("LayerNormalization",)),
    "int8-b1-float-norm-gelu": Recipe(
        **_B1, float_layers=("LayerNormalization",), float_ops=("GELU",)
    ),
    "int8-b1-float-norm-gelu-attention": Recipe(**_FLOAT_NORM_GELU_ATTENTION),
    # the logits layer float too: int8 logits tie the top two classes on low-margin images
    "int8-b1-float-norm-gelu-attention-logits": Recipe(
        **_FLOAT_NORM_GELU_ATTENTION, float_logits=True
    ),
}

_MATMUL_CONV = ("MatMul", "Conv")
_UNFUSED = dict(op_types=_MATMUL_CONV, optimize_first=False)  # Dense stays MatMul, so int8
# candidates of `onnx-int8 --max-accuracy-drop`
ONNX_RECIPES: dict[str, OnnxRecipe] = {
    "qdq-minmax": OnnxRecipe(),
    "qdq-matmul-conv-minmax": OnnxRecipe(op_types=_MATMUL_CONV),
    "qdq-matmul-conv-unfused-minmax": OnnxRecipe(**_UNFUSED),
    "qdq-matmul-conv-unfused-per-tensor-minmax": OnnxRecipe(**_UNFUSED, per_channel=False),
    "qdq-matmul-conv-unfused-reduce-range-minmax": OnnxRecipe(**_UNFUSED, reduce_range=True),
    "qdq-matmul-conv-unfused-percentile": OnnxRecipe(**_UNFUSED, method="percentile"),
    "qdq-matmul-conv-unfused-entropy": OnnxRecipe(**_UNFUSED, method="entropy"),
    # ORT's advice for transformers on CPU: int8 MatMuls on activations quantized per call
    "dynamic-matmul-per-tensor": OnnxRecipe(
        dynamic=True, op_types=("MatMul",), per_channel=False, optimize_first=False
    ),
    "dynamic-matmul-reduce-range": OnnxRecipe(
        dynamic=True, op_types=("MatMul",), reduce_range=True, optimize_first=False
    ),
}


@dataclass(frozen=True)
class SearchSpace:
    """The recipes of one format, how to build an artifact's bytes from one, and the fp32
    artifact of the same runtime whose latency the candidates are compared with."""

    recipes: dict[str, Recipe] | dict[str, OnnxRecipe]
    build: Callable[[ExportSource, object, str], bytes]
    suffix: str
    runtime: str
    fp32: Callable[[ExportSource], bytes]


# the search spaces of the formats that take --max-accuracy-drop (see export/converters.py)
TFLITE_SEARCH = SearchSpace(
    TFLITE_RECIPES,
    lambda src, recipe, _: tflite_bytes(src, recipe),
    ".tflite",
    "litert",
    lambda src: tflite_bytes(src, FP32),  # the `tflite` format
)
ONNX_SEARCH = SearchSpace(
    ONNX_RECIPES,
    onnx_int8_bytes,
    ".onnx",
    "ort-cpu",
    lambda src: fp32_onnx(src).SerializeToString(),  # the `onnx` graph
)


def check_budget(points: float) -> float:
    """A finite number of top-1 points from 0 to MAX_DROP_POINTS (UsageError otherwise): a
    negative budget would ask int8 to beat the float model, which only validation noise
    "meets"; a larger one than any drop can be limits nothing."""
    if not math.isfinite(points):
        raise UsageError(f"--max-accuracy-drop must be a finite number of points, got {points}")
    if not 0 <= points <= MAX_DROP_POINTS:
        raise UsageError(
            f"--max-accuracy-drop must be 0 or more top-1 points, at most {MAX_DROP_POINTS:g} "
            f"(the most the int8 file may lose against the float model), got {points:.15g}: pass "
            "e.g. 1"
        )
    return float(points)


def validation_split(src: ExportSource) -> tuple[np.ndarray, np.ndarray]:
    """float32 images and labels of the validation split of the run's own data."""

    return src.memo("validation_split", lambda: load_split(src.run, "val", option=None)[:2])


def _logits(run: Callable[[np.ndarray], np.ndarray], images: np.ndarray) -> np.ndarray:
    return run_in_chunks(run, images, EVAL_BATCH)


def float_logits(src: ExportSource) -> np.ndarray:
    """Logits of the Keras float model on the validation split."""
    images, _ = validation_split(src)
    predict = lambda x: np.asarray(src.model(x, training=False))  # noqa: E731
    return src.memo("float_logits", lambda: _logits(predict, images))


def float_top1(src: ExportSource) -> float:
    """Top-1 of the Keras float model on the validation split."""
    return top1(float_logits(src), validation_split(src)[1])


def _latency(path: Path, runtime: str, protocol: Protocol) -> dict:
    """Batch-1 p50 and spread, measured as `toolkit bench` measures: in a fresh worker process,
    where the search's own sessions, thread pools and TensorFlow cannot disturb it."""
    row = run_worker(path, runtime, 1, protocol, THREADS)
    if row.get("status") != "ok":
        raise RuntimeError(f"latency of {path.name}: {row.get('reason')}")
    return {"p50_ms": round(row["p50_ms"], 4), "latency_spread": round(row["spread"], 3)}


def _judge(path: Path, runtime: str, src: ExportSource, protocol: Protocol) -> dict:
    """Top-1 and agreement with the float model's classes on the validation split, and batch-1
    latency, of one artifact file."""
    images, labels = validation_split(src)
    session = open_artifact(path, runtime, RuntimeOptions(threads=THREADS))
    scores = top1_vs_reference(_logits(session.run, images), float_logits(src), labels)
    return {
        "top1": scores["top1_accuracy"],
        "agreement": scores["top1_agreement"],
        **_latency(path, runtime, protocol),
    }


def search(
    src: ExportSource,
    fmt: str,
    space: SearchSpace,
    path: Path,
    budget: float,
    protocol: Protocol | None = None,
) -> dict:
    """Write the fastest candidate of `space` (the search space of format `fmt`) within `budget`
    points to `path`; return the record.

    Raises UsageError, with `path` untouched, when no candidate is within the budget.
    """
    protocol = protocol or SEARCH_PROTOCOL
    reference = float_top1(src)
    images = len(validation_split(src)[1])
    work = Path(src.scratch) / "int8-search" / fmt
    work.mkdir(parents=True, exist_ok=True)
    fp32_file = work / f"fp32{space.suffix}"
    fp32_file.write_bytes(space.fp32(src))
    fp32_p50 = _latency(fp32_file, space.runtime, protocol)["p50_ms"]
    candidates: list[dict] = []
    for i, (name, recipe) in enumerate(space.recipes.items(), 1):
        stage = f"{fmt} search candidate"
        progress(stage, i, len(space.recipes), f"{name}: building, scoring, timing")
        row: dict = {"recipe": name, "settings": recipe_settings(recipe)}
        start = time.perf_counter()
        file = work / f"{name}{space.suffix}"
        try:
            file.write_bytes(space.build(src, recipe, name))
            row.update(_judge(file, space.runtime, src, protocol))
        except Exception as exc:  # noqa: BLE001  (a recipe the converter rejects is skipped)
            if full_disk(exc) is not None:  # not the recipe's fault: the search stops
                raise
            row["error"] = f"{type(exc).__name__}: {first_line(exc)[:200]}"
        else:
            row["drop_points"] = 100.0 * (reference - row["top1"])
            row["size_bytes"] = file.stat().st_size
            row["within_budget"] = row["drop_points"] <= budget
            row["speedup_vs_fp32"] = round(fp32_p50 / row["p50_ms"], 3)
        row["seconds"] = round(time.perf_counter() - start, 1)
        candidates.append(row)
    best = choose(candidates)
    if best is None:
        raise UsageError(_no_fit(fmt, budget, candidates, images))
    shutil.copyfile(work / f"{best['recipe']}{space.suffix}", path)
    return {
        "max_accuracy_drop_points": budget,
        "split": "validation",
        "images": images,
        "float_top1": reference,
        "latency": {
            "runtime": space.runtime,
            "batch": 1,
            "threads": THREADS,
            "statistic": "p50_ms",
            "protocol": asdict(protocol),
        },
        "recipe": best["recipe"],
        "settings": best["settings"],
        "top1": best["top1"],
        "drop_points": best["drop_points"],
        "agreement": best["agreement"],
        "p50_ms": best["p50_ms"],
        "fp32_p50_ms": fp32_p50,
        "speedup_vs_fp32": best["speedup_vs_fp32"],
        "candidates": candidates,
    }


def choose(candidates: list[dict], tie: float = LATENCY_TIE) -> dict | None:
    """Among the candidates within the budget, those whose p50 is within `tie` of the fastest
    count as equally fast (run-to-run noise is of that size); of them the one that agrees most
    with the float model wins, then the faster. None if no candidate is within the budget."""
    fits = [c for c in candidates if c.get("within_budget")]
    if not fits:
        return None
    fastest = min(c["p50_ms"] for c in fits)
    tied = [c for c in fits if c["p50_ms"] <= fastest * (1.0 + tie)]
    return max(tied, key=lambda c: (c.get("agreement", 0.0), -c["p50_ms"]))


def recipe_settings(recipe: object | None) -> dict:
    """A recipe's fields as JSON values ({} for None)."""
    if recipe is None:
        return {}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(recipe).items()}


def _no_fit(fmt: str, budget: float, candidates: list[dict], images: int) -> str:
    judged = [c for c in candidates if "drop_points" in c]
    if not judged:
        return f"{fmt}: no int8 recipe converted ({candidates[0].get('error', '?')})"
    best = min(judged, key=lambda c: c["drop_points"])
    return (
        f"{fmt}: no int8 recipe keeps the top-1 drop within --max-accuracy-drop {budget:g} "
        f"points on {images} validation images; the smallest drop is "
        f"{best['drop_points']:.2f} points ({best['recipe']}): raise the budget"
    )
