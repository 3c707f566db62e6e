"""report.html: the one page a person opens to choose a file, self-contained (inline SVG charts,
inline PNG thumbnails, no script, a CSP that loads nothing): the float model's accuracy,
confusion matrix and per-class accuracy, every benched file's accuracy, latency and size with
the picks marked, the int8 files' error layer by layer, and test images with predictions.

The page only renders: the figures come from the Shipment (bench.json, verify.json, model.json
as ship read them), the predictions on the test split from predictions.py.
"""

from __future__ import annotations

import base64
import io
import math
from datetime import UTC, datetime
from html import escape
from importlib import resources
from pathlib import Path

import numpy as np

from toolkit.common import atomic
from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles import BenchReport, BenchRow, Manifest, VerifyReport
from toolkit.runfiles.folder import BENCH_FILES, VERIFY_FILE
from toolkit.ship import charts
from toolkit.ship.names import REPORT_FILE
from toolkit.ship.picks import Pick
from toolkit.ship.predictions import Predictions, predict
from toolkit.ship.shipment import Shipment
from toolkit.ship.webpick import runtime_label

ROUNDING_RMSE = 1 / math.sqrt(12)  # rmse/scale of pure rounding (verify/attribution.py's)
EXAMPLE_ROUNDS = 2  # test images shown per class (the first ones of the split)
MAX_EXAMPLES = 24
MAX_DISAGREEMENTS = 8  # extra examples where a pick and the float model differ
THUMBNAIL = 96  # px, longest side of an example image
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
MB = 1 << 20


def write_report(bundle_dir: Path, s: Shipment) -> Path:
    """Write bundle_dir/report.html for the shipment (its predictions computed here, once:
    predictions.py) and return its path. Needs bench.json, verify.json and the exported files."""
    target = atomic.check_writable(Path(bundle_dir) / REPORT_FILE)
    run = s.run.path
    for name, found, command in (
        (BENCH_FILES[0], s.measurements.bench.to_json(), "bench"),
        (VERIFY_FILE, s.measurements.verify.to_json(), "verify"),
    ):
        if not found:
            raise UsageError(f"{run / name} not found: run `toolkit {command} {run}` first")
    atomic.write_text(target, page(s, predict(s)))
    return target


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


def _float_section(p: Predictions, targets: dict[str, list[str]]) -> str:
    reference, labels, names = p.reference, p.labels, p.names
    n = len(names)
    matrix = confusion(labels, reference.classes, n)
    series = {}
    for file, item in p.files.items():
        who = "float model" if file == reference.file else ", ".join(targets.get(file, []))
        label = f"{who}: {file} (top-1 {_pct(item.top1(labels), 2)})"
        series[label] = per_class_accuracy(labels, item.classes, n)
    return (
        "<section id='float'><h2>The float model</h2>"
        f"<p class='big'>test top-1 <b>{_pct(reference.top1(labels), 2)}</b> on "
        f"{len(labels)} images</p><p>{p.note}.</p>"
        "<h3>Confusion matrix</h3><figure class='chart' id='confusion'>"
        + charts.heatmap(matrix.tolist(), names)
        + "</figure><h3>Per-class accuracy</h3><figure class='chart' id='per-class'>"
        + charts.grouped_bars(names, {k: v.tolist() for k, v in series.items()})
        + "</figure></section>"
    )


def _threads(r: BenchRow) -> int | None:
    """The row's thread count where it records one (the web rows: 1, and the most)."""
    return r.threads


def _runtime(r: BenchRow) -> str:
    """The row's runtime (its library, for a web row), backend and thread count."""
    return runtime_label(r.runtime, _threads(r), r.backend)


def _point(r: BenchRow, tags: tuple[str, ...]) -> charts.Point:
    """A benched row as a point of the scatter chart (coloured by runtime)."""
    size = r.size_bytes or 0
    title = (
        f"{r.file} in {_runtime(r)}: {r.p50_ms:.3f} ms, top-1 {_pct(r.top1, 2)}, {size / MB:.2f} MB"
    )
    return charts.Point(r.p50_ms or 0.0, r.top1 or 0.0, size, str(r.runtime), title, tags)


def _bench_cells(r: BenchRow, mark: str) -> list[str]:
    """A benched row's cells in the table under the chart."""
    peak = r.peak_rss_mb
    return [
        f"<code>{escape(str(r.file))}</code>",
        escape(str(r.format)),
        escape(_runtime(r)),
        f"{r.p50_ms:.3f}" if r.ok and r.p50_ms else escape(r.status or ""),
        _pct(r.top1, 2),
        f"{r.size_bytes / MB:.2f}" if r.size_bytes else "-",
        f"{peak:.0f}" if r.ok and peak else "-",
        f"<b>{escape(mark)}</b>" if mark else "",
    ]


def _picked(r: BenchRow, picks: dict[str, Pick]) -> list[str]:
    """The targets whose pick was made on row `r`: its file and runtime, and its thread count
    where the pick records one (a web runtime has a row per thread count)."""
    return [
        target
        for target, p in picks.items()
        if (p.file, p.runtime) == (r.file, r.runtime) and p.threads in (None, _threads(r))
    ]


def _bench_section(bench: BenchReport, picks: dict[str, Pick], reference_top1: float) -> str:
    batch = min(bench.protocol.get("batches") or [1])
    rows = [r for r in bench.rows if r.batch == batch]
    points = [
        _point(r, tuple(_picked(r, picks)))
        for r in rows
        if r.ok and r.top1 is not None and r.p50_ms
    ]
    table = [_bench_cells(r, ", ".join(_picked(r, picks))) for r in rows]
    machine = bench.machine
    where = (
        f"{escape(str(machine.get('cpu', '?')))}, {machine.get('cores', '?')} cores "
        f"({escape(' '.join(machine.get('cpu_flags') or []))}), "
        f"{bench.protocol.get('threads', '?')} threads, batch {batch}; "
        f"<code>{escape(bench.command or 'toolkit bench')}</code> on "
        f"{escape(str(bench.date or '?'))}"
    )
    chart = charts.scatter(points, reference_top1) if points else "<p>No row of bench.json ran.</p>"
    return (
        "<section id='tradeoff'><h2>Accuracy, latency and size</h2>"
        f"<p>Every file in every runtime <code>toolkit bench</code> timed (the <code>web-*</code> "
        f"rows: a browser library in headless Chromium): {where}. Ringed: the "
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


def _int8_section(verify: VerifyReport, manifest: Manifest, targets: dict[str, list[str]]) -> str:
    files = [
        f.filename
        for name, f in FORMATS.items()
        if f.int8_attribution and name in manifest.artifacts
    ]
    head = "<section id='int8'><h2>Int8 error, layer by layer</h2>"
    attribution = verify.int8_attribution
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


def _examples_section(p: Predictions, targets: dict[str, list[str]]) -> str:
    labels, names, reference = p.labels, p.names, p.reference.file
    classes = {k: v.classes for k, v in p.files.items()}
    cards = []
    for i in example_indices(labels, classes, reference):
        lines = []
        for file, item in p.files.items():
            who = "float" if file == reference else ", ".join(targets.get(file, [file]))
            guess = int(item.classes[i])
            ok = guess == labels[i]
            lines.append(
                f"<li class='{'ok' if ok else 'wrong'}'>{escape(who)}: "
                f"{escape(names[guess])} {'✓' if ok else '✗'}</li>"
            )
        cards.append(
            f"<figure class='example' data-index='{i}'><img alt='test image {i}' "
            f"src='{thumbnail(p.images[i])}'><figcaption><b>{escape(names[int(labels[i])])}</b>"
            f"<ul>{''.join(lines)}</ul></figcaption></figure>"
        )
    return (
        "<section id='examples'><h2>Test images</h2><p>The first test images of each class, "
        "then images where a pick and the float model disagree; bold: the true class.</p>"
        f"<div class='examples'>{''.join(cards)}</div></section>"
    )


def page(s: Shipment, p: Predictions) -> str:
    """report.html's text: the shipment's figures and the predictions, rendered."""
    run, bench, verify = s.run, s.measurements.bench, s.measurements.verify
    title = f"{s.options.get('model', run.path.name)} ({s.options.get('preset', '?')})"
    targets = _targets_of(s.picks)
    css = (resources.files("toolkit.ship") / "assets" / "report.css").read_text("utf-8")
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    versions = verify.versions or bench.versions
    sections = [
        _picks_section(s.picks),
        _bench_section(bench, s.picks, p.top1(p.reference.file)),
        _float_section(p, targets),
        _int8_section(verify, s.manifest, targets),
        _examples_section(p, targets),
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}: ship report</title><style>{css}</style></head><body><main>"
        f"<h1>{escape(title)}: what to ship</h1><p class='meta'>Run <code>{escape(str(run.path))}"
        f"</code>; test split of <code>{escape(p.spec)}</code> ({len(p.labels)} images, "
        f"{len(p.names)} classes); verified {escape(str(verify.date or '?'))}; written "
        f"{generated}; "
        + escape(", ".join(f"{k} {v}" for k, v in versions.items()))
        + "</p>"
        + "".join(sections)
        + "</main></body></html>\n"
    )
