"""MODEL_CARD.md: a Hugging Face model card for the bundle. Its YAML header holds the license,
tags, datasets, metrics and a `model-index` with each file's test top-1; its body, per file, the
precision, size, top-1 and its change from float, agreement, latency per runtime on the machine
bench.json names, the parity record verify.json holds, the input and output contract of
model.json, and the embed snippet of each target that ships it.

Every figure is read from bench.json, verify.json and model.json as they are (nothing is
measured here); the header is YAML whose every value is a JSON scalar, which YAML reads as is.
"""

from __future__ import annotations

import json
from pathlib import PurePath

from toolkit.bench.machine import cpu_text
from toolkit.formats import FORMATS
from toolkit.runfiles import ArtifactEntry, Manifest
from toolkit.runfiles.folder import LABELS_FILE
from toolkit.ship.measurements import Measurements
from toolkit.ship.picks import (
    TIE_MARGIN,
    Pick,
    candidates,
    speedup_over_float,
    verify_cell,
    within,
)
from toolkit.ship.shipment import Shipment
from toolkit.ship.targets import PROVIDERS, TARGETS
from toolkit.ship.webpick import runtime_label, web_choice

# Hugging Face license ids a run's --license may name as they are; anything else is "other"
HF_LICENSES = (
    "apache-2.0",
    "mit",
    "bsd-2-clause",
    "bsd-3-clause",
    "cc-by-4.0",
    "cc-by-sa-4.0",
    "cc-by-nc-4.0",
    "cc0-1.0",
    "gpl-3.0",
    "lgpl-3.0",
    "mpl-2.0",
    "openrail",
)
# data specs with a Hugging Face dataset id
HF_DATASETS = {"cifar10": "uoft-cs/cifar10", "cifar100": "uoft-cs/cifar100"}
MODEL_NAMES = {"shiftvit": "ShiftViT", "vit-lsa": "ViT with SPT and LSA", "vit": "ViT"}


# -- the YAML header --------------------------------------------------------------------------


def yaml_block(value: object, indent: int = 0) -> list[str]:
    """`value` (dicts of identifier keys, lists, JSON scalars) as block-style YAML lines; every
    scalar is written as JSON (a double-quoted string is a YAML one)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:")
                lines += yaml_block(item, indent + 2)
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list) and item:
                first, *rest = yaml_block(item, indent + 2)
                lines.append(f"{pad}- {first.lstrip()}")
                lines += rest
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    else:
        lines.append(f"{pad}{_scalar(value)}")
    return lines


def _scalar(value: object) -> str:
    if isinstance(value, dict | list):  # empty ones
        return "{}" if isinstance(value, dict) else "[]"
    return json.dumps(value, ensure_ascii=False)


def license_fields(s: Shipment) -> dict:
    """`license` (a Hugging Face id), with `license_name` when the run's --license is another."""
    given = str(s.config.option("license", "")).strip()
    if given.lower() in HF_LICENSES:
        return {"license": given.lower()}
    if not given:
        return {"license": "other"}
    return {"license": "other", "license_name": given}


def dataset_id(s: Shipment) -> str:
    """The Hugging Face dataset id of the run's data, else its dataset name."""
    return HF_DATASETS.get(s.config.data.split(":")[0], s.config.dataset_name)


def shipped(picks: dict[str, Pick]) -> dict[str, list[Pick]]:
    """File -> the picks that ship it, in order of first pick."""
    files: dict[str, list[Pick]] = {}
    for pick in picks.values():
        files.setdefault(pick.file, []).append(pick)
    return files


def header(s: Shipment) -> dict:
    """The card's YAML header as a dict."""
    files = shipped(s.picks)
    tags = ["image-classification", "vision-transformer", s.config.model]
    tags += sorted({PurePath(f).suffix.lstrip(".") for f in files} | {"edge"})
    tags += sorted({FORMATS[p[0].format].precision for p in files.values()})
    tags += sorted({p.runtime for p in s.picks.values()})
    dataset = dataset_id(s)
    models = s.measurements.verify.models
    split = (models.split if models else None) or "test"
    first = next(iter(s.picks.values()))

    def result(what: str, value: float) -> dict:
        return {
            "task": {"type": "image-classification", "name": "Image Classification"},
            "dataset": {"name": dataset, "type": dataset, "split": split},
            "metrics": [{"type": "accuracy", "name": f"top-1 accuracy, {what}", "value": value}],
        }

    results = [result("model.keras (float32, Keras)", first.float_top1)]
    for file, ps in files.items():
        results.append(result(f"{file} ({ps[0].format})", ps[0].top1))
    return {
        **license_fields(s),
        "pipeline_tag": "image-classification",
        "tags": list(dict.fromkeys(tags)),
        "datasets": [dataset],
        "metrics": ["accuracy"],
        "model-index": [{"name": s.name, "results": results}],
    }


# -- the body ---------------------------------------------------------------------------------


def percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def change(pick: Pick) -> str:
    """The file's top-1 change from the float model, in points (+0.00 when none)."""
    return f"{(pick.top1 - pick.float_top1) * 100 + 0.0:+.2f} points"


def shape_text(shape: list) -> str:
    """[None, 32, 32, 3] -> '[N, 32, 32, 3]': N is any batch."""
    return "[" + ", ".join("N" if d is None else str(d) for d in shape) + "]"


def ms(x: float) -> str:
    return f"{x:.3f} ms"


def _tensor(spec: dict) -> str:
    tensor = f" (tensor `{spec['tensor']}`)" if spec.get("tensor") else ""
    shape = shape_text(spec.get("shape", []))
    quant = ""
    if spec.get("scale") is not None:
        quant = f", quantized: real = {spec['scale']:g} x (q - {spec.get('zero_point')})"
    return f"`{spec['name']}`{tensor}: {spec['dtype']} {shape}{quant}"


def tensors(entry: ArtifactEntry) -> tuple[list[dict], list[dict]]:
    """A file's input and output tensors as model.json records them (name, dtype, shape...)."""
    return [dict(t) for t in entry.inputs], [dict(t) for t in entry.outputs]


def preprocessing_summary(manifest: Manifest) -> str:
    """model.json's one sentence on what the files do to the pixels they take."""
    return str(manifest.preprocessing.get("summary", ""))


def contract_lines(manifest: Manifest, entry: ArtifactEntry) -> list[str]:
    """The input and output of one file as an app codes against them (model.json)."""
    shape = manifest.input
    inputs, outputs = tensors(entry)
    what = (
        "softmax probabilities (sum 1)"
        if entry.output == "probabilities"
        else "logits (apply a softmax for probabilities)"
    )
    lines = []
    if inputs:
        lines.append(
            f"- **Input**: {_tensor(inputs[0])}, {shape.get('layout', 'NHWC')} "
            f"{shape.get('range', 'RGB 0-255')} pixels, not 0-1; {preprocessing_summary(manifest)}"
        )
    if outputs:
        lines.append(
            f"- **Output**: {_tensor(outputs[0])}, {what}; class i is line i of `{LABELS_FILE}`"
        )
    return lines


def latency_text(m: Measurements, fmt: str, ranked_by: dict[str, list[str]]) -> str:
    """p50 at batch 1 of the file on every runtime bench.json timed it on."""
    parts = []
    for row in m.bench.rows:
        if row.format != fmt or row.batch != 1:
            continue
        runtime = row.runtime
        figure = ms(row.p50_ms) if row.ok and row.p50_ms is not None else row.status or "?"
        ranks = f" (ranks {', '.join(ranked_by[runtime])})" if runtime in ranked_by else ""
        on = runtime_label(runtime, row.threads, row.backend)
        parts.append(f"{on} {figure}{ranks}")
    return "; ".join(parts) or "not timed"


def parity_text(m: Measurements, pick: Pick) -> str:
    """The verify cell the top-1 came from: status, tolerance, figures, versions."""
    cell = verify_cell(m, pick.format, pick.runtime)
    if cell is None:
        return "not verified (top-1 from bench.json)"
    tolerance = ", ".join(
        f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in cell.tolerance.items()
    )
    metrics = cell.metrics
    figures = [
        f"max abs {metrics['max_abs']:.3g}" if metrics.get("max_abs") is not None else "",
        f"cosine {metrics['cosine']:.6f}" if metrics.get("cosine") is not None else "",
        f"top-1 agreement {percent(metrics.get('top1_agreement'))}",
        f"top-1 change {metrics.get('top1_delta', 0) * 100:+.2f} points",
    ]
    record = (m.manifest.artifacts[pick.format].parity or {}).get("runtimes") or {}
    version = (record.get(cell.runtime) or {}).get("version")
    versions = ", ".join(f"{k} {v}" for k, v in m.verify.versions.items())
    return (
        f"{cell.status} on {cell.runtime} {version or ''}".rstrip()
        + f" (`toolkit verify`, {m.verify.date}); tolerance: {tolerance}; figures: "
        + ", ".join(f for f in figures if f)
        + f"; versions: {versions}"
    )


def snippet_fields(manifest: Manifest, entry: ArtifactEntry, pick: Pick) -> dict:
    path = PurePath(pick.file)
    shape = manifest.input
    inputs, _ = tensors(entry)
    return {
        "file": pick.file,
        "stem": path.stem,
        "ext": path.suffix.lstrip("."),
        "input": (inputs or [{}])[0].get("name", "image"),
        "output": entry.output or "probabilities",
        "height": shape.get("height"),
        "width": shape.get("width"),
        "providers": PROVIDERS.get(pick.runtime, PROVIDERS["ort-cpu"]),
    }


def file_section(m: Measurements, file: str, picks: list[Pick]) -> list[str]:
    """The card's section of one bundled file."""
    pick = picks[0]
    fmt = FORMATS[pick.format]
    entry = m.manifest.artifacts[pick.format]
    ranked_by: dict[str, list[str]] = {}
    for p in picks:
        ranked_by.setdefault(p.runtime, []).append(p.target)
    agreement = (
        f"; agrees with the float model's top-1 on {percent(pick.agreement)} of the images"
        if pick.agreement is not None
        else ""
    )
    lines = [
        f"### `{file}`: {', '.join(p.target for p in picks)}",
        "",
        f"- **Format**: `{fmt.name}`, {fmt.description}; precision {fmt.precision}",
        f"- **Size**: {pick.size_bytes:,} bytes; sha256 `{entry.sha256}`",
        f"- **Top-1** (test split): {percent(pick.top1)}, {change(pick)} from the float model "
        f"({percent(pick.float_top1)}){agreement}",
        f"- **Latency** (p50, batch 1): {latency_text(m, pick.format, ranked_by)}",
        *[line for p in picks for line in choice_lines(m, p)],
        f"- **Parity**: {parity_text(m, pick)}",
        *([f"- **On a CPU**: {fmt.cpu_note}"] if fmt.cpu_note else []),
        *contract_lines(m.manifest, entry),
    ]
    for p in picks:
        snippet = TARGETS[p.target].snippet_for(file, p.runtime)
        code = snippet.render(**snippet_fields(m.manifest, entry, p)).rstrip("\n")
        lines += ["", f"Embed ({p.target}):", "", f"```{snippet.language}", code, "```"]
    return lines + [""]


def choice_lines(m: Measurements, p: Pick) -> list[str]:
    """Why `p` won for its target: its speed-up over the float file on the same runtime (with
    the range its rows' rounds allow), and, when it won a tie, with what and by which rule."""
    lines = []
    up = speedup_over_float(m, p, TARGETS[p.target].backend)
    if up is not None:
        lines.append(
            f"- **Speed-up** ({p.target}, {p.runtime}): {up.ratio:.2f}x the float "
            f"`{up.float_file}` at p50 (the rows' rounds: {up.low:.2f}-{up.high:.2f}x)"
        )
    if p.tied_with:
        lines.append(
            f"- **A tie** ({p.target}): its p50 is within {TIE_MARGIN:.0%} of the fastest "
            f"({ms(p.fastest_p50_ms or p.p50_ms)}), as is {'; '.join(p.tied_with)}: the "
            "smaller file wins a tie (then the higher agreement with the float model)"
        )
    return lines


def candidate_rows(s: Shipment) -> list[str]:
    """Every file each target could take: latency, top-1, drop, and whether it was in budget."""
    rows = [
        "| target | file | ranked on | p50 batch 1 | top-1 | change | within budget | shipped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, pick in s.picks.items():
        found, _ = candidates(s.measurements, TARGETS[name], pick.float_top1)
        for c in sorted(found, key=lambda c: c.p50_ms):
            on = runtime_label(c.runtime, c.threads)
            chosen = (c.file, c.runtime) == (pick.file, pick.runtime)
            rows.append(
                f"| {name} | `{c.file}` | {on} | {ms(c.p50_ms)} | {percent(c.top1)} | "
                f"{change(c)} | {'yes' if within(c, s.max_drop) else 'no'} | "
                f"{'**yes**' if chosen else ''} |"
            )
    return rows


def body(s: Shipment) -> list[str]:
    """The card's Markdown after the header."""
    m, picks, max_drop, config = s.measurements, s.picks, s.max_drop, s.config
    machine = m.bench.machine
    models = m.verify.models
    first = next(iter(picks.values()))
    samples = models.samples if models else None
    one_image = f"; one image is {100 / samples:.2g} points" if samples else ""
    model = MODEL_NAMES.get(config.model, config.model)
    synthetic = (
        " Its data is synthetic: the accuracy says nothing about real images."
        if config.dataset.get("synthetic")
        else ""
    )
    lines = [
        f"# {s.name}",
        "",
        f"{model} (`{config.preset}` preset) image classifier trained by `toolkit "
        f"train` on `{config.data}` ({config.num_classes} classes, input "
        f"{'x'.join(map(str, config.image_shape))} RGB).{synthetic} This bundle "
        f"holds, for each target, the fastest exported file on the machine below whose test "
        f"top-1 is at most {max_drop:g} points below the float model's "
        f"(`toolkit ship --max-accuracy-drop {max_drop:g}`).",
        "",
        "| target | file | format | ranked on | p50 batch 1 | top-1 | change | agreement | size |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, p in picks.items():
        lines.append(
            f"| {name} | `{p.file}` | `{p.format}` | {p.runtime} | {ms(p.p50_ms)} | "
            f"{percent(p.top1)} | {change(p)} | {percent(p.agreement)} | {p.size_bytes:,} B |"
        )
    threads = m.bench.threads
    lines += [
        "",
        f"- **Machine**: {cpu_text(machine) if machine.get('cpu') else 'unknown'}, "
        f"{machine.get('cores')} cores, {threads} threads; latency from `bench.json` of "
        f"{m.bench.date} (`{m.bench.command}`): this machine's (the `web-*` rows in "
        "headless Chromium on it), not a phone's; time the file there before you rely on it.",
        f"- **Top-1**: `verify.json` of {m.verify.date}: every file and the float "
        f"`model.keras` ({percent(first.float_top1)}) on the {samples} images of the test "
        f"split of `{models.data if models else None}`{one_image}.",
        "",
        "## Files",
        "",
    ]
    if "web" in picks:
        lines += ["## The web app's library", "", *web_choice(s), ""]
    for file, ps in shipped(picks).items():
        lines += file_section(m, file, ps)
    lines += [
        "## How the files were chosen",
        "",
        f"For each target, among the files its runtime loads (web: every file in every "
        f"browser library that loads it), the lowest p50 at batch 1 whose top-1 is within "
        f"{max_drop:g} points of the float model's; a file beyond that is never shipped. "
        f"Files within {TIE_MARGIN:.0%} of the lowest p50 are tied (rows timed minutes apart "
        "move by that much), and the smaller file wins a tie, then the higher agreement.",
        "",
        *candidate_rows(s),
        "",
    ]
    return lines


def model_card(s: Shipment) -> str:
    """MODEL_CARD.md's text."""
    return "\n".join(["---", *yaml_block(header(s)), "---", "", *body(s)])
