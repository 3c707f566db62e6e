"""Markdown tables of every (model, preset): what it is for, architecture, size, compute and
training recipe, each preset built for the workload it is made for (`presets.workload`).

docs/presets.md holds them between markers (`<!-- NAME:begin -->` ... `<!-- NAME:end -->`, one
pair per entry of `doc_blocks()`); a test checks they are what this code gives, and
`python -m toolkit.models.table` rewrites them there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from toolkit.common.durations import format_seconds
from toolkit.models.architectures import ShiftViTArch, ViTArch
from toolkit.models.counts import COUNTS_FILE, Counts, built_counts, count_key, fingerprint
from toolkit.models.counts import preset_counts as _counts
from toolkit.models.paper_figures import PAPER_FIGURES
from toolkit.models.presets import (
    IMAGENET,
    PRESET_PURPOSES,
    PRESETS,
    SMALL_IMAGES,
    get_preset,
    workload,
)
from toolkit.models.recipes import TrainRecipe

README_INPUT = SMALL_IMAGES.input_shape
README_CLASSES = SMALL_IMAGES.num_classes
DOC = Path(__file__).resolve().parents[2] / "docs" / "presets.md"


def _shiftvit_shape(arch: ShiftViTArch) -> str:
    widths = [arch.dim * 2**i for i in range(len(arch.depths))]
    return f"blocks {'-'.join(map(str, arch.depths))} / width {widths[0]}-{widths[-1]}"


def _vit_shape(arch: ViTArch) -> str:
    return f"{arch.depth} blocks / width {arch.dim}, {arch.num_heads} heads x {arch.key_dim}"


# architecture class -> its "depth / width" cell
_SHAPES: dict[type, Callable] = {ShiftViTArch: _shiftvit_shape, ViTArch: _vit_shape}


def _pairs(names: set[str] | None) -> list[tuple[str, str]]:
    """Every (model, preset name) of PRESETS, in order; only `names` when given."""
    return [
        (m, p) for m, presets in PRESETS.items() for p in presets if names is None or p in names
    ]


def preset_table(
    input_shape: tuple[int, int, int] = README_INPUT,
    num_classes: int = README_CLASSES,
    names: set[str] | None = None,
    counts: Callable[..., Counts] = _counts,
) -> str:
    """Tabulate each preset's (those in `names`, or all) size, compute and recipe for
    `input_shape` images; `counts` gives (params, MACs): shipped, or built where not shipped."""
    rows = [
        "| model | preset | for | image | patch | depth / width | parameters | MACs / image "
        "| length | batch |",
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for model, name in _pairs(names):
        preset = get_preset(model, name)
        arch, train = preset.arch, preset.train
        params, macs = counts(preset, input_shape, num_classes)
        rows.append(
            f"| {model} | {name} | {PRESET_PURPOSES[name]} | {arch.image_size} "
            f"| {arch.patch_size} | {_SHAPES[type(arch)](arch)} | {params:,} "
            f"| {macs / 1e6:,.1f} M | {length(train)} | {train.batch_size} |"
        )
    return "\n".join(rows)


# what the "length" column's time budgets mean, under the table `toolkit presets` prints
LENGTH_NOTE = (
    "A length in minutes or hours is a time budget: `toolkit train` trains within it on any "
    "machine, from the command's start to the saved model (setup, validation and the final "
    "test included), the schedule planned to end with it; `--epochs N` trains N epochs "
    "instead. Where the minutes go: docs/presets.md, 'Time budgets'."
)


def length(train: TrainRecipe) -> str:
    """How long a preset trains: its time budget (`--epochs N` makes a fixed run), or epochs."""
    if train.time_budget is None:
        return f"{train.epochs} epochs"
    return f"{format_seconds(train.time_budget)}, or {train.epochs} epochs"


def paper_table(counts: Callable[..., Counts] = _counts) -> str:
    """The ImageNet presets with a row in their paper's table, counted for ImageNet-1k
    (224x224 RGB, 1000 classes), beside the paper's parameters, FLOPs (MACs) and top-1."""
    rows = [
        "| model | preset | paper's model | depth / width | MLP ratio | drop path | parameters "
        "| paper | MACs / image | paper | paper top-1 | epochs | global batch |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, name in _pairs(None):
        if (model, name) not in PAPER_FIGURES or workload(name) != IMAGENET:
            continue
        preset, paper = get_preset(model, name), PAPER_FIGURES[model, name]
        arch, train = preset.arch, preset.train
        params, macs = counts(preset, IMAGENET.input_shape, IMAGENET.num_classes)
        rows.append(
            f"| {model} | {name} | {paper.name} | {_SHAPES[type(arch)](arch)} "
            f"| {arch.mlp_ratio:g} | {arch.drop_path:g} | {params:,} "
            f"| {paper.params_m:g} M | {macs / 1e9:.2f} G | {paper.gflops:.1f} G "
            f"| {paper.top1:g}% | {train.epochs} | {train.batch_size} |"
        )
    return "\n".join(rows)


CIFAR_PAPER_PRESET = "paper-cifar"
GPU_NOT_MEASURED = "not measured"  # the GPU column until a lent GPU's record says otherwise
# what one lent GPU measured of a preset that no call was long enough to train to the paper's
# top-1: (the GPU, minutes the whole recipe takes at its measured train-step speed); the
# records are records/gpu_train.jsonl's gpu-train-paper-*-h200 rows (pinned against them by
# studies/tests/test_records.py)
GPU_RECIPE_MINUTES: dict[tuple[str, str], tuple[str, float]] = {
    ("vit-lsa", "paper-cifar"): ("H200", 31.2),
    ("shiftvit", "paper-cifar"): ("H200", 32.7),
}


def _gpu_cell(model: str, preset: str) -> str:
    """The minutes to the paper's top-1 are not measured yet; where a GPU timed the train step,
    the minutes its whole recipe takes at that speed."""
    if (model, preset) not in GPU_RECIPE_MINUTES:
        return GPU_NOT_MEASURED
    gpu, minutes = GPU_RECIPE_MINUTES[model, preset]
    return f"{GPU_NOT_MEASURED} (the whole recipe: {minutes:g} min on one {gpu}, bf16)"


def cifar_paper_table(counts: Callable[..., Counts] = _counts) -> str:
    """Every model's `paper-cifar` preset at 32x32 RGB and 10 classes beside the SPT/LSA
    paper's figures (where it has a row there), and the GPU figure: minutes to the paper's
    top-1, "not measured" (CPU figures are not shown: a GPU's work)."""
    rows = [
        "| model | preset | paper's model | depth / width | drop path | parameters "
        "| MACs / image | paper's FLOPs (64x64) | paper top-1 (CIFAR-10) | epochs | batch "
        "| GPU: minutes to the paper's top-1 |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for model, name in _pairs({CIFAR_PAPER_PRESET}):
        preset, paper = get_preset(model, name), PAPER_FIGURES.get((model, name))
        arch, train = preset.arch, preset.train
        params, macs = counts(preset, README_INPUT, README_CLASSES)
        theirs = ("-", "-", "-")
        if paper:
            theirs = (paper.name, f"{paper.gflops * 1e3:,.1f} M", f"{paper.top1:g}%")
        rows.append(
            f"| {model} | {name} | {theirs[0]} | {_SHAPES[type(arch)](arch)} | {arch.drop_path:g} "
            f"| {params:,} | {macs / 1e6:,.1f} M | {theirs[1]} | {theirs[2]} | {train.epochs} "
            f"| {train.batch_size} | {_gpu_cell(model, name)} |"
        )
    return "\n".join(rows)


def preset_table_markdown(counts: Callable[..., Counts] = _counts) -> str:
    """The presets made for small images, at 32x32 RGB input and 10 classes, newline-ended."""
    small = {p for _, p in _pairs(None) if workload(p) == SMALL_IMAGES}
    return preset_table(README_INPUT, README_CLASSES, small, counts) + "\n"


def doc_blocks(counts: Callable[..., Counts] = _counts) -> dict[str, str]:
    """docs/presets.md's generated blocks: marker name -> markdown (newline-terminated)."""
    return {
        "presets": preset_table_markdown(counts),
        "paper-presets": paper_table(counts) + "\n",
        "paper-cifar-presets": cifar_paper_table(counts) + "\n",
    }


def counts_table() -> dict[str, dict]:
    """preset_counts.json's content, built: every preset at the workload it is made for."""
    table = {}
    for model, name in _pairs(None):
        preset, load = get_preset(model, name), workload(name)
        params, macs = built_counts(preset, load.input_shape, load.num_classes)
        key = count_key(preset, load.input_shape, load.num_classes)
        table[key] = {"fingerprint": fingerprint(preset), "params": params, "macs": macs}
    return table


def with_blocks(text: str, blocks: dict[str, str]) -> str:
    """`text` with what lies between each block's markers replaced by the block's markdown."""
    for marker, body in blocks.items():
        start, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
        if start not in text or end not in text.split(start, 1)[1]:
            raise ValueError(f"no {start.strip()} ... {end} markers: add them where it goes")
        head, rest = text.split(start, 1)
        text = head + start + body + end + rest.split(end, 1)[1]
    return text


def main(argv: list[str] | None = None) -> int:
    """Rewrite preset_counts.json from built models, then the generated blocks of
    docs/presets.md (or the file given) in place."""
    import json

    from toolkit.common.atomic import write_text
    from toolkit.models.counts import shipped_counts

    write_text(COUNTS_FILE, json.dumps(counts_table(), indent=1, sort_keys=True) + "\n")
    shipped_counts.cache_clear()
    path = Path(argv[0]) if argv else DOC
    write_text(path, with_blocks(path.read_text(), doc_blocks()))
    print(f"updated {COUNTS_FILE} and {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
