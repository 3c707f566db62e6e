"""report.html: the one page a person opens to choose a file, self-contained (inline SVG charts,
inline PNG thumbnails, no script, a CSP that loads nothing): the float model's accuracy,
confusion matrix and per-class accuracy, every benched file's accuracy, latency and size with
the picks marked, the int8 files' error layer by layer, and test images with predictions.

Predictions are computed here, on the run's test split, with the runtimes the files ship to
(LiteRT, ONNX Runtime); the float reference is the float32 .tflite or .onnx, which
`toolkit verify` compares with the Keras model, so no model runs in Keras here.
"""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from importlib import resources
from pathlib import Path

import numpy as np

from toolkit import atomic
from toolkit.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.manifest import modified_files
from toolkit.runfolder import CONFIG_FILE, MODEL_FILE, VERIFY_FILE, Run, read_json
from toolkit.ship import charts
from toolkit.ship.picks import Pick

REPORT_FILE = "report.html"
BENCH_FILE = "bench.json"
# float32 files of any batch that run without TensorFlow, in the order tried as the float
# reference (LiteRT's first: the runtime the apps embed)
FLOAT_REFERENCES = tuple(
    sorted(
        (n for n, f in FORMATS.items() if f.precision == "fp32" and f.batch is None),
        key=lambda n: FORMATS[n].runtime != "litert",
    )
)
ROUNDING_RMSE = 1 / math.sqrt(12)  # rmse/scale of pure rounding (verify/attribution.py's)
EXAMPLE_ROUNDS = 2  # test images shown per class (the first ones of the split)
MAX_EXAMPLES = 24
MAX_DISAGREEMENTS = 8  # extra examples where a pick and the float model differ
THUMBNAIL = 96  # px, longest side of an example image
CHUNK = 256  # images per runtime call
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
MB = 1 << 20


@dataclass(frozen=True)
class Predicted:
    """One file's predicted classes on the test split, and how they were computed."""

    file: str
    format: str
    runtime: str
    classes: np.ndarray

    def top1(self, labels: np.ndarray) -> float:
        return float(np.mean(self.classes == labels))


def write_report(bundle_dir: Path, run_dir: Path, picks: dict[str, Pick]) -> Path:
    """Write bundle_dir/report.html for the run's files and `picks` (target -> Pick); return
    its path. Needs RUN/bench.json, RUN/verify.json and the exported files."""
    bundle_dir, run_dir = Path(bundle_dir), Path(run_dir)
    target = atomic.check_writable(bundle_dir / REPORT_FILE)
    run = _run(run_dir)
    bench = _read(run_dir / BENCH_FILE, f"toolkit bench {run_dir}")
    verify = _read(run_dir / VERIFY_FILE, f"toolkit verify {run_dir}")
    manifest = run.manifest()
    models = verify.get("models") or {}
    from toolkit.rundata import load_split  # the data loaders: only when a report is written

    images, labels, spec = load_split(run, models.get("split", "test"), models.get("data"))
    names = run.class_names
    reference, note = _float_reference(run, manifest, verify, images)
    predicted = {reference.file: reference}
    for pick in picks.values():
        if pick.file not in predicted:
            predicted[pick.file] = _predict(run, manifest, pick.format, images)
    page = _page(
        run,
        bench,
        verify,
        manifest,
        picks,
        predicted,
        reference.file,
        note,
        images,
        labels,
        names,
        spec,
    )
    atomic.write_text(target, page)
    return target


# -- the data --


def _run(run_dir: Path) -> Run:
    """The run folder from its config.json (not `open_run`, which imports Keras to check it)."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise UsageError(f"{run_dir} has no {CONFIG_FILE}: pass a run folder of `toolkit train`")
    return Run(path=run_dir, config=read_json(path))


def _read(path: Path, command: str) -> dict:
    if not path.is_file():
        raise UsageError(f"{path} not found: run `{command}` first")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is unreadable ({exc}): run `{command}` again") from exc


def _runtime_of(fmt: str) -> str:
    """The runtime that runs a format's file here (litert, ort-cpu)."""
    return FORMATS[fmt].runtime


def _session(path: Path, runtime: str):
    from toolkit.runtimes import open_artifact

    return open_artifact(path, runtime)


def _classes(session, images: np.ndarray) -> np.ndarray:
    from toolkit.runtimes import run_in_chunks
    from toolkit.runtimes.base import close_session

    try:
        return run_in_chunks(session.run, images, CHUNK).argmax(axis=1)
    finally:
        close_session(session)


def _predict(run: Run, manifest: dict, fmt: str, images: np.ndarray) -> Predicted:
    entry = manifest["artifacts"].get(fmt)
    if not entry:
        raise UsageError(
            f"{run.export_dir} has no {fmt} file: run `toolkit export {run.path} --format {fmt}`"
        )
    runtime = _runtime_of(fmt)
    session = _session(run.export_dir / entry["file"], runtime)
    return Predicted(entry["file"], fmt, runtime, _classes(session, images))


def _verify_cell(verify: dict, fmt: str, runtime: str) -> dict | None:
    for cell in (verify.get("models") or {}).get("cells", []):
        if cell.get("format") == fmt and cell.get("runtime") == runtime:
            return cell
    return None


def _float_reference(
    run: Run, manifest: dict, verify: dict, images: np.ndarray
) -> tuple[Predicted, str]:
    """The float model's predictions, from a float32 file that runs without TensorFlow where
    there is one, and the page's sentence on why that file may stand for it (verify's figures
    against Keras)."""
    changed = modified_files(run.export_dir, manifest, FLOAT_REFERENCES)
    for fmt in FLOAT_REFERENCES:
        entry = manifest["artifacts"].get(fmt)
        if not entry or fmt in changed or not (run.export_dir / entry["file"]).is_file():
            continue
        runtime = _runtime_of(fmt)
        cell = _verify_cell(verify, fmt, runtime)
        if cell and cell.get("status") == "pass":
            m = cell["metrics"]
            why = (
                f"computed with {entry['file']} in {runtime}, which <code>toolkit verify</code> "
                f"found equal to the Keras model on these images (top-1 agreement "
                f"{m['top1_agreement']:.1%}, max |difference| {m['max_abs']:.2g}, tolerance "
                f"{_tolerance(cell)}; Keras top-1 {m['reference_top1_accuracy']:.2%})"
            )
        else:
            status = cell.get("status") if cell else "not verified"
            why = f"computed with {entry['file']} in {runtime} (verify: {status})"
        classes = _classes(_session(run.export_dir / entry["file"], runtime), images)
        return Predicted(entry["file"], fmt, runtime, classes), why
    classes = _classes(_session(run.path / MODEL_FILE, "keras"), images)
    why = f"computed with {MODEL_FILE} in Keras (no float32 .tflite or .onnx file was exported)"
    return Predicted(MODEL_FILE, "keras", "keras", classes), why


def _tolerance(cell: dict) -> str:
    tol = cell.get("tolerance") or {}
    parts = [f"{k} {v:g}" for k, v in tol.items() if isinstance(v, int | float)]
    return ", ".join(parts) or "-"


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """(classes, classes) counts: row the true class, column the predicted one."""
    matrix = np.zeros((classes, classes), np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix


def per_class_accuracy(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """Accuracy per true class (NaN for a class with no test image)."""
    totals = np.bincount(labels, minlength=classes)
    hits = np.bincount(labels[predicted == labels], minlength=classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, hits / np.maximum(totals, 1), np.nan)


def example_indices(
    labels: np.ndarray, predicted: dict[str, np.ndarray], reference: str
) -> list[int]:
    """The first test images of each class (EXAMPLE_ROUNDS each, MAX_EXAMPLES in all), then
    images where a pick and the float model disagree."""
    by_class = [np.flatnonzero(labels == c) for c in range(int(labels.max()) + 1)]
    chosen: list[int] = []
    for r in range(EXAMPLE_ROUNDS):
        for found in by_class:
            if r < len(found) and len(chosen) < MAX_EXAMPLES:
                chosen.append(int(found[r]))
    ref = predicted[reference]
    differ = np.zeros(len(labels), bool)
    for name, classes in predicted.items():
        if name != reference:
            differ |= classes != ref
    extra = [int(i) for i in np.flatnonzero(differ) if int(i) not in chosen]
    return chosen + extra[:MAX_DISAGREEMENTS]


def thumbnail(image: np.ndarray) -> str:
    """A data: URI of the image as PNG, its longest side at most THUMBNAIL px."""
    from PIL import Image

    picture = Image.fromarray(np.clip(np.rint(image), 0, 255).astype(np.uint8))
    if max(picture.size) > THUMBNAIL:
        picture.thumbnail((THUMBNAIL, THUMBNAIL))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


# -- the page --


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.{digits}f}%"


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape text before)."""
    header = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _targets_of(picks: dict[str, Pick]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for target, pick in picks.items():
        found.setdefault(pick.file, []).append(target)
    return found


def _picks_section(picks: dict[str, Pick]) -> str:
    rows = []
    for target, p in picks.items():
        drop = 100 * (p.top1 - p.float_top1)
        rows.append(
            [
                f"<b>{escape(target)}</b>",
                f"<code>{escape(p.file)}</code>",
                escape(p.format),
                escape(p.runtime),
                f"{p.p50_ms:.3f}",
                _pct(p.top1, 2),
                f"{drop:+.2f}",
                _pct(p.agreement),
                f"{p.size_bytes / MB:.2f}",
            ]
        )
    head = [
        "target",
        "file",
        "format",
        "ranked by",
        "p50 ms",
        "top-1",
        "Δ points",
        "agreement",
        "MB",
    ]
    return (
        "<section id='picks'><h2>The picks</h2><p>For each target, the fastest file (p50 at "
        "batch 1 in the runtime that target uses, on the machine below) whose test top-1 is "
        "within the accuracy budget of the float model's; Δ is its change from the float "
        "model, agreement the share of test images where it predicts the float model's "
        "class.</p>" + _table(head, rows) + "</section>"
    )


def _float_section(
    reference: Predicted,
    note: str,
    labels: np.ndarray,
    names: list[str],
    predicted: dict[str, Predicted],
    targets: dict[str, list[str]],
) -> str:
    n = len(names)
    matrix = confusion(labels, reference.classes, n)
    series = {}
    for file, item in predicted.items():
        who = "float model" if file == reference.file else ", ".join(targets.get(file, []))
        label = f"{who}: {file} (top-1 {_pct(item.top1(labels), 2)})"
        series[label] = per_class_accuracy(labels, item.classes, n)
    return (
        "<section id='float'><h2>The float model</h2>"
        f"<p class='big'>test top-1 <b>{_pct(reference.top1(labels), 2)}</b> on "
        f"{len(labels)} images</p><p>{note}.</p>"
        "<h3>Confusion matrix</h3><figure class='chart' id='confusion'>"
        + charts.heatmap(matrix.tolist(), names)
        + "</figure><h3>Per-class accuracy</h3><figure class='chart' id='per-class'>"
        + charts.grouped_bars(names, {k: v.tolist() for k, v in series.items()})
        + "</figure></section>"
    )


def _bench_section(bench: dict, picks: dict[str, Pick], reference_top1: float) -> str:
    batches = (bench.get("protocol") or {}).get("batches") or [1]
    batch = min(batches)
    rows = [r for r in bench.get("rows", []) if r.get("batch") == batch]
    tags: dict[tuple[str, str], list[str]] = {}
    for target, p in picks.items():
        tags.setdefault((p.file, p.runtime), []).append(target)
    points = [
        charts.Point(
            r["p50_ms"],
            r["top1"],
            int(r["size_bytes"]),
            r["runtime"],
            f"{r['file']} in {r['runtime']}: {r['p50_ms']:.3f} ms, top-1 {_pct(r['top1'], 2)}, "
            f"{r['size_bytes'] / MB:.2f} MB",
            tuple(tags.get((r["file"], r["runtime"]), ())),
        )
        for r in rows
        if r.get("status") == "ok" and r.get("top1") is not None and r.get("p50_ms")
    ]
    table = []
    for r in rows:
        mark = ", ".join(tags.get((r["file"], r["runtime"]), []))
        ok = r.get("status") == "ok"
        table.append(
            [
                f"<code>{escape(r['file'])}</code>",
                escape(r["format"]),
                escape(r["runtime"]),
                f"{r['p50_ms']:.3f}" if ok and r.get("p50_ms") else escape(r.get("status", "")),
                _pct(r.get("top1"), 2),
                f"{r['size_bytes'] / MB:.2f}" if r.get("size_bytes") else "-",
                f"{r['peak_rss_mb']:.0f}" if ok and r.get("peak_rss_mb") else "-",
                f"<b>{escape(mark)}</b>" if mark else "",
            ]
        )
    machine = bench.get("machine") or {}
    where = (
        f"{escape(str(machine.get('cpu', '?')))}, {machine.get('cores', '?')} cores "
        f"({escape(' '.join(machine.get('cpu_flags') or []))}), "
        f"{(bench.get('protocol') or {}).get('threads', '?')} threads, batch {batch}; "
        f"<code>{escape(bench.get('command', 'toolkit bench'))}</code> on "
        f"{escape(str(bench.get('date', '?')))}"
    )
    chart = charts.scatter(points, reference_top1) if points else "<p>No row of bench.json ran.</p>"
    return (
        "<section id='tradeoff'><h2>Accuracy, latency and size</h2>"
        f"<p>Every file in every runtime <code>toolkit bench</code> timed: {where}. Ringed: the "
        "picks, named by target.</p><figure class='chart' id='scatter'>"
        + chart
        + "</figure>"
        + _table(
            ["file", "format", "runtime", "p50 ms", "top-1", "MB", "peak RSS MB", "pick"],
            table,
            "rows",
        )
        + "</section>"
    )


def _int8_section(verify: dict, manifest: dict, targets: dict[str, list[str]]) -> str:
    files = [
        f.filename
        for name, f in FORMATS.items()
        if f.int8_attribution and name in manifest["artifacts"]
    ]
    head = "<section id='int8'><h2>Int8 error, layer by layer</h2>"
    attribution = verify.get("int8_attribution")
    if not files:
        return head + "<p>No full-int8 file was exported.</p></section>"
    if not attribution:
        return (
            head + "<p>verify.json has no int8 attribution: run <code>toolkit verify</code>.</p>"
            "</section>"
        )
    if "error" in attribution:
        return head + f"<p>{escape(attribution['error'])}</p></section>"
    layers = sorted(
        (r for r in attribution.get("layers", []) if r.get("rmse/scale") is not None),
        key=lambda r: r.get("tensor_idx", 0),
    )
    picked = [
        f"<code>{escape(f)}</code> ({escape(', '.join(targets[f]))})" for f in files if f in targets
    ]
    names = ", ".join(f"<code>{escape(f)}</code>" for f in files)
    top = sorted(layers, key=lambda r: -r["rmse/scale"])[:10]
    rows = [
        [
            escape(r["op_name"]),
            f"<code>{escape(r['tensor_name'])}</code>",
            f"{r['rmse/scale']:.2f}",
            f"{r.get('num_elements', 0):.0f}",
        ]
        for r in top
    ]
    return (
        head + f"<p>{names} share one int8 recipe; TFLite's QuantizationDebugger re-quantizes the "
        f"model with it on {attribution.get('debug_samples', '?')} images and compares every "
        "quantized tensor with its float value: rmse/scale is the error in steps of the "
        f"tensor's int8 grid, {ROUNDING_RMSE:.2f} for rounding alone. "
        + (f"Picked: {', '.join(picked)}." if picked else "")
        + "</p><figure class='chart' id='layers'>"
        + charts.layer_errors(
            [r["rmse/scale"] for r in layers],
            [f"{r['op_name']} {r['tensor_name']}" for r in layers],
            ROUNDING_RMSE,
        )
        + "</figure><h3>The ten largest</h3>"
        + _table(["op", "tensor", "rmse/scale", "elements"], rows)
        + "</section>"
    )


def _examples_section(
    images: np.ndarray,
    labels: np.ndarray,
    names: list[str],
    predicted: dict[str, Predicted],
    reference: str,
    targets: dict[str, list[str]],
) -> str:
    classes = {k: v.classes for k, v in predicted.items()}
    cards = []
    for i in example_indices(labels, classes, reference):
        lines = []
        for file, item in predicted.items():
            who = "float" if file == reference else ", ".join(targets.get(file, [file]))
            guess = int(item.classes[i])
            ok = guess == labels[i]
            lines.append(
                f"<li class='{'ok' if ok else 'wrong'}'>{escape(who)}: "
                f"{escape(names[guess])} {'✓' if ok else '✗'}</li>"
            )
        cards.append(
            f"<figure class='example' data-index='{i}'><img alt='test image {i}' "
            f"src='{thumbnail(images[i])}'><figcaption><b>{escape(names[int(labels[i])])}</b>"
            f"<ul>{''.join(lines)}</ul></figcaption></figure>"
        )
    return (
        "<section id='examples'><h2>Test images</h2><p>The first test images of each class, "
        "then images where a pick and the float model disagree; bold: the true class.</p>"
        f"<div class='examples'>{''.join(cards)}</div></section>"
    )


def _page(
    run: Run,
    bench: dict,
    verify: dict,
    manifest: dict,
    picks: dict[str, Pick],
    predicted: dict[str, Predicted],
    reference: str,
    note: str,
    images: np.ndarray,
    labels: np.ndarray,
    names: list[str],
    spec: str,
) -> str:
    options = run.config.get("options") or {}
    title = f"{options.get('model', run.path.name)} ({options.get('preset', '?')})"
    targets = _targets_of(picks)
    ref = predicted[reference]
    css = (resources.files("toolkit.ship") / "assets" / "report.css").read_text("utf-8")
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    versions = verify.get("versions") or (bench.get("machine") or {}).get("versions") or {}
    sections = [
        _picks_section(picks),
        _bench_section(bench, picks, ref.top1(labels)),
        _float_section(ref, note, labels, names, predicted, targets),
        _int8_section(verify, manifest, targets),
        _examples_section(images, labels, names, predicted, reference, targets),
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}: ship report</title><style>{css}</style></head><body><main>"
        f"<h1>{escape(title)}: what to ship</h1><p class='meta'>Run <code>{escape(str(run.path))}"
        f"</code>; test split of <code>{escape(spec)}</code> ({len(labels)} images, "
        f"{len(names)} classes); verified {escape(str(verify.get('date', '?')))}; written "
        f"{generated}; "
        + escape(", ".join(f"{k} {v}" for k, v in versions.items()))
        + "</p>"
        + "".join(sections)
        + "</main></body></html>\n"
    )
