"""Measurement records: check records/*.jsonl and write records/README.md, one table per kind.

python -m studies.records [--check]

Each line of records/KIND.jsonl is one run of one command on one machine (a repeat or another
machine is another line). Every line names its command as it was run, date, commit (or null
and a commit_note saying what is known), machine (CPU model, flags, cores) and versions; the
figures follow, in the kind's own keys. A bad line stops everything: one line on stderr,
FILE:LINE: KEY: problem, exit 2. --check exits 1 when records/README.md is not what the
records give. Notes in records/notes/ link rows as ../README.md#ROW_ID; a link to no row is a
bad line too. Product tests do not read records; studies/tests/test_records.py does.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[1] / "records"
ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:\d{2}))?")
FLAGS = {"avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16"}
LINK = re.compile(r"README\.md#([A-Za-z0-9_.-]+)")
PROVENANCE = {
    "id": str,
    "what": str,
    "command": str,
    "date": str,
    "machine": dict,
    "versions": dict,
}
MACHINE = {"cpu": str, "flags": list, "cores": int}
FIGURES = {  # the keys a row of each kind carries besides its provenance
    "accuracy": ("model", "preset"),
    "bench": ("model", "preset", "protocol", "rows"),
    "epoch_stall": ("model", "preset", "images", "modes"),
    "export_size": ("model", "preset", "files"),
    "gpu_train": ("model", "preset", "gpu", "images_per_s", "recipe_minutes", "test_top1"),
    "input_path": ("model", "preset", "backend", "precision", "rows"),
    "int8_accuracy": ("model", "preset", "data", "files"),
    "int8_search": ("model", "preset", "searches"),
    "interleaved": ("model", "preset", "threads", "segments", "calls", "call", "files"),
    "kernel_profile": ("model", "preset", "format", "symbols"),
    "op_profile": ("model", "preset", "format", "threads", "total_ms", "op_types"),
    "ort_cuda": ("model", "preset", "format", "rows", "cuda_vs_cpu"),
    "ort_mobile_cost": ("model", "preset", "threads", "segments", "calls", "rows"),
    "product_threads": ("threads", "products"),
    "recipe_ablation": ("model", "preset", "epochs", "rows"),
    "step_profile": ("model", "preset", "images_per_s", "kind_ms"),
    "stream_memory": ("rss", "loader", "step", "epoch"),
    "train_throughput": ("batch", "results"),
    "verify": ("model", "preset"),
    "web_bench": ("model", "preset", "browser", "rows"),
}
# MACs per image at 10 classes, worked out by hand from each preset's architecture (the
# derivations: tests/test_macs.py, which pins the same counts against toolkit's count_macs);
# `cpu15` is `cpu60`'s architecture trained a quarter of the time
MACS = {
    ("shiftvit", "seed"): 103_890_432,
    ("shiftvit", "tiny"): 1_804_800,
    ("shiftvit", "cpu60"): 12_159_488,
    ("vit-lsa", "seed"): 205_264_896,
    ("vit-lsa", "tiny"): 4_277_504,
    ("vit-lsa", "cpu60"): 12_519_936,
    ("vit", "seed"): 205_264_896 - 144 * (540 - 108) * 64,
    ("vit", "tiny"): 4_277_504 - 64 * (240 - 48) * 48,
    ("vit", "cpu60"): 12_519_936 - 64 * (240 - 48) * 64,
}
MACS.update({(model, "cpu15"): MACS[(model, "cpu60")] for model in ("shiftvit", "vit-lsa", "vit")})

# the counts of a preset's earlier architectures, which its older rows were measured on: the
# `cpu60` ShiftViT was patch 4, widths 48-384, blocks 2-2-4-2 until issue 42's re-tune (4bc1b46):
# 64*48*48 + 2*64*9216 + 16*192*96 + 2*16*36864 + 4*384*192 + 4*4*147456 + 768*384 + 2*589824
# + 384*10 (built and counted in studies/tests/test_records.py)
EARLIER_MACS: dict[tuple[str, str], tuple[int, ...]] = {("shiftvit", "cpu60"): (6_934_272,)}


class BadRow(Exception):
    """A row that breaks the schema, as FILE:LINE: KEY: problem."""


def _typed(row: dict, spec: dict[str, type], prefix: str = "") -> None:
    """Each key of `spec` present in `row` with that type, else BadRow('key: problem')."""
    for key, kind in spec.items():
        if key not in row:
            raise BadRow(f"{prefix}{key}: missing")
        if not isinstance(row[key], kind) or isinstance(row[key], bool):
            raise BadRow(f"{prefix}{key}: not a {kind.__name__}")


def check_bench_macs(row: dict) -> None:
    """GMAC/s and roofline fractions of a bench row come from the hand-counted MACs."""
    macs = MACS.get((row["model"], row["preset"]))
    known = {macs, *EARLIER_MACS.get((row["model"], row["preset"]), ())}
    peaks = {}
    for p in row.get("peaks", []):
        peaks.setdefault(p["runtime"], []).append(p["peak_gmacs"])
    for i, r in enumerate(row["rows"]):
        if r.get("status") != "ok" or r.get("gmacs") is None:
            continue
        key = f"rows[{i}]"
        if macs is None or r.get("macs_per_image") not in known:
            raise BadRow(
                f"{key}.macs_per_image: {r.get('macs_per_image')}, not the hand count {macs}"
            )
        macs_row = r["macs_per_image"]
        if not math.isclose(r["gmacs"], macs_row * r["batch"] / (r["p50_ms"] * 1e6), rel_tol=1e-3):
            raise BadRow(f"{key}.gmacs: {r['gmacs']} is not MACs x batch / p50")
        fraction = r.get("roofline_fraction")
        if fraction is not None and not any(
            math.isclose(fraction, r["gmacs"] / p, rel_tol=1e-3)
            for p in peaks.get(r["runtime"], [])
        ):
            raise BadRow(f"{key}.roofline_fraction: {fraction} is no peak of {r['runtime']}")


def check_row(row: object, kind: str) -> None:
    """BadRow('key: problem') unless `row` has the provenance and the figures of `kind`."""
    if not isinstance(row, dict):
        raise BadRow("row: not a JSON object")
    _typed(row, PROVENANCE)
    if not ID.fullmatch(row["id"]):
        raise BadRow(f"id: {row['id']!r} is not a lowercase slug")
    if not DATE.fullmatch(row["date"]):
        raise BadRow(f"date: {row['date']!r} is not an ISO 8601 date")
    if "commit" not in row:
        raise BadRow("commit: missing (null when not recorded)")
    if row["commit"] is None and not isinstance(row.get("commit_note"), str):
        raise BadRow("commit_note: missing (what is known of the commit when commit is null)")
    if row["commit"] is not None and not re.fullmatch(r"[0-9a-f]{7,40}", str(row["commit"])):
        raise BadRow(f"commit: {row['commit']!r} is not a git hash")
    _typed(row["machine"], MACHINE, "machine.")
    unknown = set(row["machine"]["flags"]) - FLAGS
    if unknown:
        raise BadRow(f"machine.flags: unknown {sorted(unknown)}")
    for name, version in row["versions"].items():
        if not isinstance(version, str):
            raise BadRow(f"versions.{name}: not a string")
    for key in FIGURES.get(kind, ()):
        if key not in row:
            raise BadRow(f"{key}: missing (a {kind} row's figure)")
    try:
        if kind == "bench":
            check_bench_macs(row)
        SUMMARY.get(kind, _nothing)(row)  # the table's figures cell reads these keys
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
        raise BadRow(f"figures: {type(error).__name__} {error}") from None


def load(folder: Path = RECORDS) -> dict[str, list[dict]]:
    """Every row of folder/*.jsonl by kind, checked; ids unique; the notes' links resolve."""
    records: dict[str, list[dict]] = {}
    seen: dict[str, str] = {}
    for path in sorted(folder.glob("*.jsonl")):
        rows = records.setdefault(path.stem, [])
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.name}:{number}"
            try:
                row = json.loads(line)
                check_row(row, path.stem)
            except json.JSONDecodeError as error:
                raise BadRow(f"{where}: json: {error.msg}") from None
            except BadRow as error:
                raise BadRow(f"{where}: {error}") from None
            if row["id"] in seen:
                raise BadRow(f"{where}: id: {row['id']!r} also at {seen[row['id']]}")
            seen[row["id"]] = where
            rows.append(row)
    for path in sorted((folder / "notes").glob("*.md")):
        for number, target in broken_links(path.read_text(), set(seen) | set(records)):
            raise BadRow(f"notes/{path.name}:{number}: link: no row {target!r}")
    return records


def broken_links(text: str, ids: set[str]) -> list[tuple[int, str]]:
    """(line, id) of each README.md#id link in `text` that names no row (or kind)."""
    return [
        (number, target)
        for number, line in enumerate(text.splitlines(), 1)
        for target in LINK.findall(line)
        if target not in ids
    ]


def _pct(x: float | None) -> str:
    """0.8002 -> '80.02%'."""
    return "-" if x is None else f"{x:.2%}"


def _bench(row: dict) -> str:
    """p50 of each file at batch 1, and the fastest files' roofline fractions."""
    ok = [r for r in row["rows"] if r["status"] == "ok" and r["batch"] == 1]
    text = ", ".join(f"{r['format']} {r['p50_ms']:.3f} ms" for r in ok)
    size = {r["format"]: r.get("size_bytes") for r in row["rows"]}
    if size.get("tflite") and size.get("tflite-int8"):
        text += f"; tflite-int8 size {size['tflite-int8'] / size['tflite']:.1%} of tflite"
    for f in row.get("fastest", []):
        share = f.get("attainable_fraction") or f.get("roofline_fraction")
        text += f"; fastest {f['precision']} `{f['format']}` at {share:.0%} of its roofline"
    return text


def _interleaved(row: dict) -> str:
    """Each file's speed-up over its runtime's fp32 file (and over --before), ORT/LiteRT fp32."""
    parts = []
    for f in row["files"]:
        if f["format"] in ("tflite", "onnx") or f["vs_fp32"] is None:
            parts.append(f"{f['format']} {f['p50_ms']:.3f} ms")
        else:
            parts.append(f"{f['format']} {f['vs_fp32']:.2f}x")
        if f.get("vs_before") is not None:
            parts[-1] += f" ({f['vs_before']:.2f}x before)"
    if row.get("ort_fp32_over_litert_fp32"):
        parts.append(f"ORT/LiteRT fp32 latency {row['ort_fp32_over_litert_fp32']:.2f}x")
    return ", ".join(parts)


def _ort_mobile_cost(row: dict) -> str:
    """model.onnx's speed over each file on ORT's CPU provider (the .ort and its causes)."""
    return ", ".join(
        f"{r['format']} {r['p50_ms']:.3f} ms"
        if r["format"] == "onnx"
        else f"{r['format']} {r['vs_fp32']:.2f}x"
        for r in row["rows"]
    )


def _accuracy(row: dict) -> str:
    """Test top-1 of a training run, or the JPEG gap's cells."""
    if "test_top1" in row:
        text = f"top-1 {_pct(row['test_top1'])}"
        text += f", top-5 {_pct(row['test_top5'])}" if "test_top5" in row else ""
        text += f", {row['epochs']} epochs"
        wall = row.get("wall_time_s")
        text += f", {wall // 60} min {wall % 60} s" if wall else ""
        budget = row.get("time_budget_s")  # a timed run (`toolkit train --time`)
        return text + (f" of a {budget / 60:g} min budget" if budget else "")
    if "top1_original" in row:
        return (
            f"original pixels {_pct(row['top1_original'])}, JPEG q75 {_pct(row['top1_jpeg'])} "
            f"on the same {row['images']:,} images"
        )
    return "; ".join(
        f"trained on {c['trained_on']}: {_pct(c['test_original'])} original, "
        f"{_pct(c['test_jpeg'])} JPEG"
        for c in row.get("cells", [])
    )


def _recipe_ablation(row: dict) -> str:
    """Each run's test top-1, its change from the preset and its speed relative to it (null:
    not measured, e.g. a run that shared the machine)."""

    def speed(r: dict) -> str:
        ratio = r["speed_vs_preset"]
        return "img/s not measured" if ratio is None else f"{ratio:.2f}x img/s"

    return "; ".join(
        f"{r['label']} {_pct(r['test_top1'])} ({r['change_points']:+.2f}), {speed(r)}"
        for r in row["rows"]
    )


def _input_path(row: dict) -> str:
    """Images/s of each input path per batch, and the device path's against the host's."""
    host = {r["batch"]: r["images_per_s"] for r in row["rows"] if r["path"] == "host"}

    def cell(r: dict) -> str:
        ratio = f" ({r['images_per_s'] / host[r['batch']]:.2f}x)" if r["batch"] in host else ""
        return f"{r['path']} {r['images_per_s']:,.0f}{ratio}"

    batches = sorted({r["batch"] for r in row["rows"]})
    per_batch = [
        f"batch {b}: " + ", ".join(cell(r) for r in row["rows"] if r["batch"] == b) for b in batches
    ]
    return f"{row['backend']} {row['precision']}, img/s: " + "; ".join(per_batch)


def _int8_accuracy(row: dict) -> str:
    """Top-1 change in points and agreement with Keras of each file."""
    return ", ".join(
        f"{f['format']} {f['change_points']:+.2f} / {_pct(f['agreement'])}" for f in row["files"]
    )


def _int8_search(row: dict) -> str:
    """Per search: how many recipes, and the chosen (or default) one's drop and speed-up."""
    parts = []
    for s in row["searches"]:
        cands = s["candidates"]
        pick = next((c for c in cands if c.get("chosen")), None)
        label = "chosen"
        if pick is None:
            pick, label = next((c for c in cands if c.get("default")), cands[0]), "default"
        parts.append(
            f"{s['format']}: {len(cands)} recipes; {label} {pick['recipe']} "
            f"(drop {pick['drop_points']:+.2f}, agreement {_pct(pick['agreement'])}, "
            f"{pick['x_fp32']:.2f}x fp32)"
        )
    return "; ".join(parts)


def _verify(row: dict) -> str:
    """Largest fp32 error per op, model-level cells, or the lowest SQNR per int8 file."""
    parts = []
    if "op_level" in row:
        worst: dict[str, float] = {}
        for r in row["op_level"]:
            err = max(r["keras_fp32"], r["litert_fp32"], r["ort_cpu_fp32"])
            worst[r["op"]] = max(worst.get(r["op"], 0.0), err)
        parts.append("fp32 max abs error: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    for r in row.get("model_level", []):
        parts.append(f"{r['format']} max abs {r['max_abs']:.2g}, agreement {_pct(r['agreement'])}")
    columns = row.get("columns", {})
    for key in columns:
        cells = [b[key] for b in row["selected_boundaries"] if b[key]]
        low = min(c["sqnr_db"] for c in cells)
        parts.append(f"{columns[key]}: lowest SQNR {low} dB")
    return "; ".join(parts)


def _ort_cuda(row: dict) -> str:
    """CUDA p50 per batch, images/s at the largest batch, CUDA-vs-CPU agreement."""
    cuda = [r for r in row["rows"] if r["runtime"] == "ort-cuda" and r["status"] == "ok"]
    text = ", ".join(f"batch {r['batch']} {r['p50_ms']:.2f} ms" for r in cuda)
    text += f"; {cuda[-1]['images_per_s']:,.0f} images/s at batch {cuda[-1]['batch']}"
    return text + f"; argmax agreement with CPU {_pct(row['cuda_vs_cpu']['argmax_agreement'])}"


def _gpu_train(row: dict) -> str:
    """Train-step images/s, the whole recipe's minutes at that speed, and what the run reached."""
    reached = row.get("minutes_to_target")
    target = _pct(row["target_top1"])
    target += " not reached" if reached is None else f" reached in {reached} min"
    return (
        f"{row['gpu']} {row['precision']}: {row['images_per_s']:,.0f} img/s, the whole recipe "
        f"{row['recipe_minutes']} min at that speed; {row['epochs_run']} of "
        f"{row['recipe_epochs']} epochs in {row['train_minutes']} min: test top-1 "
        f"{_pct(row['test_top1'])}; {target}"
    )


def _train_throughput(row: dict) -> str:
    """Each implementation's images/s and speed-up over each model's first row (the keras.io
    port of the seed presets, else "toolkit --jit")."""
    base = row["results"][0]["implementation"]
    over = "" if base == "keras.io port" else f"{row.get('preset', 'seed')}, over {base}: "
    return over + "; ".join(
        f"{r['model']} {r['implementation']} {r['images_per_s']} img/s "
        f"({r['speedup_vs_port']:.2f}x)"
        for r in row["results"]
        if r["implementation"] != base
    )


def _shares(values: dict[str, float], total: float, top: int = 3) -> str:
    """The `top` largest entries as shares of `total`."""
    ranked = sorted(values.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {v / total:.0%}" for k, v in ranked)


def _step_profile(row: dict) -> str:
    """Images/s and the largest kinds of work."""
    return f"{row['images_per_s']} img/s; " + _shares(row["kind_ms"], row["thunk_ms_per_step"])


def _op_profile(row: dict) -> str:
    """Node time in all and its largest op types."""
    ms = {k: v["ms"] for k, v in row["op_types"].items()}
    return f"{row['total_ms']} ms of node time; " + _shares(ms, row["total_ms"])


def _kernel_profile(row: dict) -> str:
    """The largest shares of the CPU samples."""
    return ", ".join(f"{s['symbol']} {s['share']:.1%}" for s in row["symbols"][:3])


def _product_threads(row: dict) -> str:
    """Range over the products of 1-thread / 2-thread time, per runtime and precision."""
    spans: dict[str, list[float]] = {}
    for p in row["products"]:
        spans.setdefault(f"{p['runtime']} {p['precision']}", []).append(p["us"]["1"] / p["us"]["2"])
    return (
        ", ".join(f"{k} {min(v):.2f}-{max(v):.2f}x" for k, v in spans.items()) + " from 2 threads"
    )


def _stream_memory(row: dict) -> str:
    """Peak RSS per folder size and mode, loader vs step images/s, CIFAR-10 epoch seconds
    (each part only where the row ran it; CPU seconds too where recorded)."""
    parts = []
    if row["rss"]:
        rss = ", ".join(
            f"{r['images']:,} {r['mode']} {r['peak_rss_gb']:.2f} GB" for r in row["rss"]
        )
        parts.append(f"peak RSS {rss}")
    if row["loader"] and row["step"]:
        loader = max(r["images_per_s"] for r in row["loader"])
        step = row["step"][0]["step_images_per_s"]
        parts.append(f"loader {loader:,.0f} img/s vs seed step {step:,.0f} img/s")
    epochs = []
    for r in row["epoch"]:
        cpu = f" ({r['epoch_cpu_s'][-1]:.1f} CPU-s)" if "epoch_cpu_s" in r else ""
        preset = r.get("preset", "tiny")
        epochs.append(f"{r['backend']} {preset} {r['mode']} {r['epoch_s'][-1]:.1f} s{cpu}")
    if epochs:
        parts.append("CIFAR-10 epoch " + ", ".join(epochs))
    return "; ".join(parts)


def _epoch_stall(row: dict) -> str:
    """Each mode's epochs after the first: wall seconds, and when their first step ended."""
    return "; ".join(
        f"{m['mode']}: epochs {', '.join(str(e['epoch_s']) for e in m['epochs'][1:])} s, "
        f"first step done {', '.join(str(e['first_step_s']) for e in m['epochs'][1:])} s in"
        for m in row["modes"]
    )


def _export_size(row: dict) -> str:
    """Each file's size (and export time)."""
    parts = [
        f"{f['format']} {f.get('size_mib', f.get('size_mb'))} {'MiB' if 'size_mib' in f else 'MB'}"
        for f in row["files"]
    ]
    if "int8_over_fp32" in row:
        parts.append(f"int8 / fp32 {row['int8_over_fp32']:.1%}")
    return ", ".join(parts)


def _web_bench(row: dict) -> str:
    """p50 of each file per library and thread count, batch 1."""
    ok = [r for r in row["rows"] if r["status"] == "ok"]
    return ", ".join(
        f"{r['format']} {r['runtime']}"
        + (f" {r['threads']}t" if r.get("threads") else "")
        + f" {r['p50_ms']:.2f} ms"
        for r in ok
    )


def _nothing(row: dict) -> str:
    """No figures cell for a kind without a summary."""
    return ""


SUMMARY: dict[str, Callable[[dict], str]] = {
    "accuracy": _accuracy,
    "bench": _bench,
    "epoch_stall": _epoch_stall,
    "export_size": _export_size,
    "gpu_train": _gpu_train,
    "input_path": _input_path,
    "int8_accuracy": _int8_accuracy,
    "int8_search": _int8_search,
    "interleaved": _interleaved,
    "kernel_profile": _kernel_profile,
    "op_profile": _op_profile,
    "ort_cuda": _ort_cuda,
    "ort_mobile_cost": _ort_mobile_cost,
    "product_threads": _product_threads,
    "recipe_ablation": _recipe_ablation,
    "step_profile": _step_profile,
    "stream_memory": _stream_memory,
    "train_throughput": _train_throughput,
    "verify": _verify,
    "web_bench": _web_bench,
}


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _machine(m: dict) -> str:
    """CPU model, flags and cores (and the GPU)."""
    flags = f" ({', '.join(m['flags'])})" if m["flags"] else ""
    gpu = f", {m['gpu']}" if m.get("gpu") else ""
    return f"{m['cpu']}{flags}, {m['cores']} cores{gpu}"


def _date(date: str) -> str:
    """2026-11-23T20:30:00+00:00 -> 2026-11-23 20:30 UTC."""
    return f"{date[:10]} {date[11:16]} UTC" if len(date) > 10 else date


def table_row(row: dict, kind: str) -> str:
    """One row of a kind's table, with its anchor in the first cell."""
    commit = f"`{row['commit']}`" if row["commit"] else "-"
    if row.get("commit_note"):
        commit += f": {row['commit_note']}"
    command = f"`{row['command']}`"
    if row.get("command_now"):
        command += f" (now `{row['command_now']}`)"
    versions = ", ".join(f"{k} {v}" for k, v in row["versions"].items())
    cells = [
        f'<a id="{row["id"]}"></a>`{row["id"]}`',
        _date(row["date"]),
        _machine(row["machine"]),
        versions,
        commit,
        row["what"],
        SUMMARY.get(kind, _nothing)(row),
        command,
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _title(path: Path) -> str:
    """A note's first heading."""
    first = path.read_text().splitlines()[0]
    return first.lstrip("# ").strip()


def render(records: dict[str, list[dict]], folder: Path = RECORDS) -> str:
    """records/README.md: the schema, the notes, one table per kind."""
    lines = [
        "# Measurement records",
        "",
        "<!-- written by `python -m studies.records` from records/*.jsonl: edit those -->",
        "",
        "One row is one run of one command on one machine; a repeat or another machine is",
        "another row. Link a row as `records/README.md#ROW_ID`. Each `KIND.jsonl` line has",
        "`id`, `what`, `command` (as it was run; `command_now` where the script has moved since),",
        "`date` (UTC), `commit` (null when not recorded, then `commit_note` says what is known),",
        "`machine` (`cpu`, `flags`, `cores`), `versions` and the kind's figures. `python -m",
        "studies.records` checks every row (and the MACs behind every bench GMAC/s) and writes",
        "this file; `--check` says whether it is current.",
        "",
        "| kind | rows | file |",
        "|---|---:|---|",
    ]
    lines += [f"| [{k}](#{k}) | {len(v)} | [{k}.jsonl]({k}.jsonl) |" for k, v in records.items()]
    notes = sorted((folder / "notes").glob("*.md"))
    if notes:
        lines += ["", "Notes (the analyses behind the figures):", ""]
        lines += [f"- [{_title(p)}](notes/{p.name})" for p in notes]
    header = "| row | date | machine | versions | commit | what | figures | command |"
    for kind, rows in records.items():
        lines += ["", f"## {kind}", "", header]
        lines.append("|---|---|---|---|---|---|---|---|")
        lines += [table_row(row, kind) for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is stale")
    parser.add_argument("--folder", type=Path, default=RECORDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        records = load(args.folder)
    except BadRow as error:
        print(f"{args.folder.name}/{error}", file=sys.stderr)
        return 2
    text = render(records, args.folder)
    readme = args.folder / "README.md"
    if args.check:
        if not readme.exists() or readme.read_text() != text:
            print(f"{readme} is stale: run python -m studies.records", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
