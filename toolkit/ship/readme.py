"""The bundle's README.md: what each file is for, and the traps a web or app developer meets
(pixel range, input size, what comes out of each file, the int8 file's tensors as model.json
records them, the tensor names each tool shows), written from model.json so it stays true for
the files shipped.
"""

from __future__ import annotations

from pathlib import PurePath

from toolkit.formats import FORMATS
from toolkit.runfiles import ArtifactEntry, Manifest
from toolkit.runfiles.folder import LABELS_FILE, MANIFEST_FILE
from toolkit.ship.card import preprocessing_summary, shape_text, shipped, tensors
from toolkit.ship.names import CARD_FILE, REPORT_FILE, WEB_DIR
from toolkit.ship.picks import Pick
from toolkit.ship.shipment import Shipment
from toolkit.ship.webpick import web_choice

LOGIT_KINDS = {".onnx", ".ort"}  # files whose output is logits (model.json: `output`)


def _dtype(spec: dict) -> str:
    if spec.get("scale") is None:
        return spec["dtype"]
    return f"{spec['dtype']} (real = {spec['scale']:g} x (q - {spec.get('zero_point')}))"


def _output_kind(entry: ArtifactEntry) -> str:
    if entry.output == "probabilities":
        return "probabilities (softmax inside, sum 1)"
    return "logits: take a softmax for probabilities (the arg max is the same)"


def _first_tensors(manifest: Manifest, fmt: str) -> tuple[ArtifactEntry, dict, dict]:
    """A format's entry, and its first input and output tensor (model.json's)."""
    entry = manifest.artifacts[fmt]
    inputs, outputs = tensors(entry)
    return entry, inputs[0], outputs[0]


def file_table(picks: dict[str, Pick], manifest: Manifest) -> list[str]:
    """One row per shipped file: targets, format, input and output tensors."""
    rows = ["| file | for | format | input | output |", "|---|---|---|---|---|"]
    for file, ps in shipped(picks).items():
        entry, inp, out = _first_tensors(manifest, ps[0].format)
        rows.append(
            f"| `{file}` | {', '.join(p.target for p in ps)} | `{ps[0].format}` | "
            f"`{inp['name']}` {_dtype(inp)} {shape_text(inp['shape'])} | `{out['name']}` "
            f"{_dtype(out)} {shape_text(out['shape'])}: {_output_kind(entry)} |"
        )
    return rows


def int8_lines(picks: dict[str, Pick], manifest: Manifest) -> list[str]:
    """What the shipped int8 .tflite files take and give, as model.json records their tensors."""
    lines = []
    for file, ps in shipped(picks).items():
        fmt = FORMATS[ps[0].format]
        if fmt.precision != "int8" or PurePath(file).suffix != ".tflite":
            continue
        _, inp, out = _first_tensors(manifest, fmt.name)
        if inp["dtype"] in ("uint8", "int8"):
            takes = (
                f"{inp['dtype']} pixels (scale {inp['scale']:g}, zero point {inp['zero_point']}: "
                "the 0-255 values themselves)"
                if inp.get("scale") == 1.0 and inp.get("zero_point") == 0
                else f"{_dtype(inp)}: quantize the 0-255 pixels with that scale and zero point"
            )
        else:
            takes = f"{inp['dtype']} pixels 0-255 (the quantization is inside)"
        if out["dtype"] in ("uint8", "int8"):
            gives = f"{_dtype(out)}: dequantize before you read the scores"
        else:
            gives = (
                f"{out['dtype']} {out['name']}: nothing to dequantize (not uint8 scores with "
                "scale 1/256)"
            )
        lines.append(f"- `{file}` takes {takes} and gives {gives}.")
    return lines


def name_rows(picks: dict[str, Pick], manifest: Manifest) -> list[str]:
    """The input and output names each tool shows for the shipped kinds of file."""
    rows = ["| tool | file | input | output |", "|---|---|---|---|"]
    key = manifest.signature.get("key", "serving_default")
    for file, ps in shipped(picks).items():
        _, inp, out = _first_tensors(manifest, ps[0].format)
        if PurePath(file).suffix == ".tflite":
            rows += [
                f"| LiteRT `Interpreter.get_input_details()` / `get_output_details()` | `{file}` "
                f"| `{inp.get('tensor', inp['name'])}` | `{out.get('tensor', out['name'])}` |",
                f'| LiteRT `get_signature_runner("{key}")` | `{file}` | `{inp["name"]}` | '
                f"`{out['name']}` |",
                f"| MediaPipe Tasks `ImageClassifier` | `{file}` | none: `classify(image)` | "
                "`classifications[0].categories` (names from the file's metadata) |",
            ]
        else:
            rows.append(f"| ONNX Runtime | `{file}` | `{inp['name']}` | `{out['name']}` |")
    return rows


def bundle_readme(s: Shipment) -> str:
    """README.md of a bundle holding the shipment's picked files (and web/ with its notes)."""
    name, picks, manifest, web_notes = s.name, s.picks, s.manifest, s.web_notes
    shape = manifest.input
    size = f"{shape.get('height')}x{shape.get('width')}"
    pre = preprocessing_summary(manifest)
    kinds = {PurePath(f).suffix for f in shipped(picks)}
    lines = [
        f"# {name}: the app bundle",
        "",
        "Written by `toolkit ship`: for each target, the fastest file within the top-1 budget "
        f"(figures, parity and embed code in [{CARD_FILE}]({CARD_FILE}); open "
        f"[{REPORT_FILE}]({REPORT_FILE}) in a browser to compare every file).",
        "",
        *file_table(picks, manifest),
        "",
        f"- `{LABELS_FILE}`: class i on line i (every `.tflite` also carries them in its "
        "metadata, which MediaPipe reads)",
        f"- `{MANIFEST_FILE}`: each file's sha256, tensors, ops, recipe and parity record; "
        "`ship`: the picks and the figures they were made on",
    ]
    if web_notes is not None:
        lines.append(
            f"- `{WEB_DIR}/`: a web page that classifies an image you pick or drop: serve this "
            f"folder (`toolkit ship RUN --serve`, or `python -m http.server` here) and open "
            f"`/{WEB_DIR}/`"
        )
    lines += [
        "",
        "## Traps",
        "",
        f"1. **Pixels 0-255, not 0-1.** Every file takes raw RGB values 0-255 and scales them "
        f"itself: {pre}. Scaling to 0-1 or normalizing again yourself gives confident, wrong "
        "classes.",
        f"2. **{size}, NHWC, RGB.** With LiteRT or ONNX Runtime, resize to {size} yourself and "
        "keep height, width, channels in that order (not NCHW, not BGR); the `.tflite` and "
        "`.ort` files take one image per call (N in a shape: any batch). MediaPipe Tasks "
        "resizes for you.",
        "3. **What comes out.** "
        + (
            "The `.tflite` files give probabilities (the softmax is inside). "
            if ".tflite" in kinds
            else ""
        )
        + (
            f"The {' and '.join(f'`{k}`' for k in sorted(kinds & LOGIT_KINDS))} files give "
            "logits: take a softmax for probabilities."
            if kinds & LOGIT_KINDS
            else ""
        ),
    ]
    int8 = int8_lines(picks, manifest)
    if int8:
        lines += ["4. **The int8 `.tflite` tensors** (as model.json records them):", ""]
        lines += [f"   {line}" for line in int8]
    lines += [
        "",
        "Tensor names per tool (Netron shows the same names):",
        "",
        *name_rows(picks, manifest),
        "",
    ]
    if web_notes is not None:
        lines += ["## The web app", "", *web_choice(s), "", web_notes.strip(), ""]
    return "\n".join(lines)
