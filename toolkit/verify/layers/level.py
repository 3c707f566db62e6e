"""Layer level (`toolkit verify RUN --layers`): every artifact's tensors at every block boundary
against the Keras model's on the same real test images, in every runtime that opens it, and the
first boundary where it leaves its precision's tolerance (rules.LAYER_RULES).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

import keras
import numpy as np

from toolkit.common.argtypes import ALL
from toolkit.common.errors import UsageError
from toolkit.common.versions import versions
from toolkit.export.signature import PROBABILITIES, with_probabilities
from toolkit.formats import FORMATS, parse_formats
from toolkit.runfiles import Manifest
from toolkit.runfiles.folder import Run, open_run
from toolkit.runfiles.hashes import sha256
from toolkit.runmodel import load_run_model
from toolkit.runtimes import run_in_chunks
from toolkit.verify.artifacts import Target, artifact_cells, level_report
from toolkit.verify.cells import FAIL, PASS, open_session, verdict
from toolkit.verify.layers import LAYER_SAMPLES
from toolkit.verify.layers.boundaries import (
    Boundary,
    Graph,
    Tap,
    keras_tensors,
    model_boundaries,
    ops_between,
    output_boundary,
)
from toolkit.verify.layers.boundary_error import compare_tensor
from toolkit.verify.layers.capture_litert import LiteRTCapture
from toolkit.verify.layers.capture_ort import OrtCapture
from toolkit.verify.levels import choose_at
from toolkit.verify.modellevel import test_images
from toolkit.verify.parity import runtime_version
from toolkit.verify.quiet import quiet_tensorflow
from toolkit.verify.rules import DEFAULT_TOLERANCES, LAYER_RULES, Tolerances, judge, rule_for
from toolkit.verify.verifier import check_exported, conclude, report_head

CHUNK = 32  # images per Keras and ORT call: bounds activation memory (LiteRT: its own batch)
NOT_FOUND = "not found"
# runtime -> capture class: opens an artifact with its boundary tensors readable
CAPTURES: dict[str, Callable] = {
    "litert": LiteRTCapture,
    "ort-cpu": OrtCapture,
    "ort-cuda": OrtCapture,
}


def check_formats(formats: str | Iterable[str] | None, manifest: Manifest) -> list[str]:
    """Exported format names to check (None: every one), in model.json order; UsageError for an
    unknown name or one the run has not exported."""
    exported = list(manifest.artifacts)
    if formats is None:
        return exported
    chosen = parse_formats(formats)
    absent = [f for f in chosen if f not in exported]
    if absent:
        raise UsageError(
            f"--format {','.join(absent)}: not exported in this run (it has "
            f"{', '.join(exported)}); export it with `toolkit export RUN --format "
            f"{','.join(absent)}` or leave it out"
        )
    return [f for f in exported if f in chosen]


def verify_layers_run(
    run_dir: str | Path,
    formats: str | Iterable[str] | None = None,
    runtimes: str | Iterable[str] = ALL,
    samples: int | None = None,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    allow_modified: bool = False,
) -> dict:
    """The report of `toolkit verify RUN --layers`; bad input (a file changed after export
    included, unless `allow_modified`) is a UsageError before any work."""
    run = open_run(run_dir)
    chosen = choose_at("layers", runtimes)
    manifest = run.manifest()
    names = check_formats(formats, manifest)
    check_exported(run, manifest, names, allow_modified)
    model = load_run_model(run)
    samples = LAYER_SAMPLES if samples is None else samples
    data = test_images(run, samples)  # --samples < 1 is a UsageError there
    options = {"level": "layers", "runtimes": chosen, "formats": names, "samples": samples}
    report = report_head(run, options, tolerances, "layers")
    with quiet_tensorflow():
        report["layers"] = verify_layers(run, model, names, chosen, tolerances, data)
    return conclude(report)


def verify_layers(
    run: Run,
    model: keras.Model,
    formats: Sequence[str],
    runtimes: Sequence[str],
    tolerances: Tolerances,
    data: tuple[np.ndarray, np.ndarray, str],
) -> dict:
    """Layer-level report: a cell per (artifact, runtime), each with a row per boundary.

    An artifact whose model.json entry says `"output": "probabilities"` (the .tflite app
    files, which end in a softmax) is held against the Keras model with the same softmax
    appended: the logits layer is then a boundary inside, the softmax the output."""
    start = time.perf_counter()
    images = data[0]
    folder, manifest = run.export_dir, run.manifest()
    measures: dict[bool, Callable[[Target], dict]] = {}

    def measure_for(probabilities: bool) -> Callable[[Target], dict]:
        if probabilities not in measures:
            reference_model = with_probabilities(model) if probabilities else model
            boundaries = model_boundaries(reference_model)
            measures[probabilities] = partial(
                _layer_cell,
                model_name=model.name,
                boundaries=boundaries,
                output=output_boundary(reference_model, boundaries),
                images=images,
                reference=keras_tensors(reference_model, boundaries, images, CHUNK),
                tolerances=tolerances,
            )
        return measures[probabilities]

    def measure(target: Target) -> dict:
        entry = manifest.artifacts.get(target.fmt)
        return measure_for(entry is not None and entry.output == PROBABILITIES)(target)

    boundaries = model_boundaries(model)
    capturing = [r for r in runtimes if r in CAPTURES]
    cells = artifact_cells(
        "layers", folder, manifest, formats, capturing, LAYER_RULES, measure, no_layer_level
    )
    rules = {f: rule_for(f, LAYER_RULES).describe(tolerances) for f in formats if f in FORMATS}
    rows = [
        {"layer": b.name, "kind": b.kind, "shape": list(b.shape), "depth": b.depth}
        for b in boundaries
    ]
    return level_report(folder, data, {}, runtimes, rules, cells, start, boundaries=rows)


def no_layer_level(fmt: str) -> str | None:
    """Why the layer level cannot read format `fmt`'s tensors (its row says), or None."""
    return FORMATS[fmt].no_layer_level if fmt in FORMATS else None


def _capture(capture, images: np.ndarray) -> dict[str, np.ndarray]:
    """The capture's boundary tensors on `images`, CHUNK images per call."""
    parts: dict[str, list[np.ndarray]] = {}
    for i in range(0, len(images), CHUNK):
        for name, value in capture.run(images[i : i + CHUNK]).items():
            parts.setdefault(name, []).append(value)
    return {name: np.concatenate(p) for name, p in parts.items()}


def _layer_cell(
    target: Target,
    model_name: str,
    boundaries: Sequence[Boundary],
    output: str,
    images: np.ndarray,
    reference: dict[str, np.ndarray],
    tolerances: Tolerances,
) -> dict:
    """Capture one artifact's boundary tensors in one runtime and judge each against Keras."""
    path, runtime, rule = target.path, target.runtime, target.rule
    digest = sha256(path)
    capture = CAPTURES[runtime](path, model_name, boundaries, output, runtime)
    tensors = _capture(capture, images)
    plain = _plain_logits(path, runtime, images)
    rows = [
        _boundary_row(b, capture.taps.get(b.name), capture.missing.get(b.name), tensors, reference)
        for b in boundaries
    ]
    for row in rows:
        if "metrics" in row:
            row["status"], reason = verdict(judge(rule, row["metrics"], tolerances))
            if reason is not None:
                row["reason"] = reason
    divergence = _first_divergence(rows, capture.graph, capture.taps)
    extra: dict = {}
    if output in tensors and isinstance(plain, np.ndarray):
        extra["instrumented_vs_plain_max_abs"] = float(np.max(np.abs(tensors[output] - plain)))
    return target.cell(
        FAIL if divergence else PASS,
        _divergence_reason(divergence),
        providers=list(capture.providers),
        runtime_version=runtime_version(runtime, versions()),
        sha256=digest,
        tolerance=rule.describe(tolerances),
        found=sum(1 for r in rows if r["status"] != NOT_FOUND),
        boundaries=rows,
        first_divergence=divergence,
        largest_drop=_largest_drop(rows, capture.graph, capture.taps),
        **extra,
    )


def _plain_logits(path: Path, runtime: str, images: np.ndarray) -> np.ndarray | str:
    """The artifact's logits as the runtime adapter runs it (no tensor kept): the check that
    reading the boundaries did not change what is computed."""
    session = open_session(path, runtime)
    if isinstance(session, str):
        return session
    return run_in_chunks(session.run, images, CHUNK)


def _boundary_row(
    b: Boundary,
    tap: Tap | None,
    missing: str | None,
    tensors: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
) -> dict:
    row: dict = {"layer": b.name, "kind": b.kind, "depth": b.depth, "shape": list(b.shape)}
    if tap is None:
        return {**row, "status": NOT_FOUND, "reason": missing or NOT_FOUND}
    row.update(tensor=tap.tensor, op=tap.op.type)
    try:
        row["metrics"] = compare_tensor(tensors[b.name], reference[b.name], tap.scale)
    except ValueError as exc:  # the name matched but the tensor is not the layer's output
        return {**row, "status": NOT_FOUND, "reason": f"{NOT_FOUND}: {exc}"}
    return row


def _previous(rows: list[dict], i: int) -> dict | None:
    """The last boundary before row i that was found in the artifact."""
    return next((r for r in reversed(rows[:i]) if "metrics" in r), None)


def _span(rows: list[dict], i: int, graph: Graph, taps: dict[str, Tap]) -> dict:
    """What lies between row i and the previous found boundary: Keras layers and graph ops."""
    before = _previous(rows, i)
    start = rows.index(before) + 1 if before is not None else 0
    after_op = taps[before["layer"]].op if before is not None else None
    return {
        "after": before["layer"] if before is not None else None,
        "layers": [r["layer"] for r in rows[start : i + 1]],
        "ops": ops_between(graph, after_op, taps[rows[i]["layer"]].op),
    }


def _first_divergence(rows: list[dict], graph: Graph, taps: dict[str, Tap]) -> dict | None:
    """The first boundary outside its tolerance, with the layers and ops since the last one."""
    for i, row in enumerate(rows):
        if row["status"] == FAIL:
            return {
                "layer": row["layer"],
                "kind": row["kind"],
                "depth": row["depth"],
                "reason": row.get("reason"),
                "metrics": row["metrics"],
                **_span(rows, i, graph, taps),
            }
    return None


def _largest_drop(rows: list[dict], graph: Graph, taps: dict[str, Tap]) -> dict | None:
    """The boundary that loses the most SQNR since the previous found one (where the error
    grows the most), or None when no boundary loses any."""
    best: tuple[float, int] | None = None
    for i, row in enumerate(rows):
        before = _previous(rows, i)
        if before is None or "metrics" not in row:
            continue
        now, then = row["metrics"]["sqnr_db"], before["metrics"]["sqnr_db"]
        if now is None or then is None:
            continue
        if then - now > 0 and (best is None or then - now > best[0]):
            best = (then - now, i)
    if best is None:
        return None
    row = rows[best[1]]
    return {
        "layer": row["layer"],
        "kind": row["kind"],
        "depth": row["depth"],
        "sqnr_drop_db": best[0],
        "metrics": row["metrics"],
        **_span(rows, best[1], graph, taps),
    }


def _divergence_reason(divergence: dict | None) -> str | None:
    if divergence is None:
        return None
    return (
        f"first divergence at {divergence['layer']} ({divergence['kind']}): {divergence['reason']}"
    )


__all__ = ["LAYER_SAMPLES", "check_formats", "verify_layers", "verify_layers_run"]
