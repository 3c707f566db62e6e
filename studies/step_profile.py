"""Where a compiled training step spends its CPU time: the XLA program of `toolkit train --jit`,
timed thunk by thunk with the TensorFlow profiler, by kind of work, by layer and by TF op.

    python -m studies.step_profile --model vit-lsa [--preset seed] [--steps 5] [--md F]

The step is the one `toolkit train --jit` compiles (model, loss, optimizer) on the preset's
batch of synthetic 32x32 images through the preset's augmentation pipeline. XLA's optimised
HLO (written with --xla_dump_to) names every thunk's instruction; its metadata gives the TF
op and the layer it came from. Times are the thunks' durations summed, per step: a thunk
that splits its work over the cores counts once, thunks that run side by side each count, so
the sum is neither the wall time nor the CPU time, but its shares say where the step goes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

# kinds of work, in report order; `kind_of` decides
MATMUL = "matmul / convolution"
RANDOM = "random bits (dropout masks)"
REDUCE = "reductions (norm moments, bias and weight gradients)"
LAYOUT = "transpose / copy"
ELEMENTWISE = "elementwise (fused)"
RUNTIME = "runtime (not an HLO instruction)"
KINDS = (MATMUL, RANDOM, REDUCE, LAYOUT, ELEMENTWISE, RUNTIME)

_RANDOM_OPS = ("StatelessRandom", "RandomUniform", "RandomStandardNormal", "RngBitGenerator")
_INSTRUCTION = re.compile(
    r"^\s+(?:ROOT\s+)?%(?P<name>[\w.\-]+) = (?:\([^)]*\)|\S+) (?P<opcode>[\w\-]+)\((?P<rest>.*)$"
)
_HEADER = re.compile(r"^(?:ENTRY )?%(?P<name>[\w.\-]+) \(")
_OP_TYPE = re.compile(r'op_type="([^"]*)"')
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def _first(pattern: re.Pattern, texts: list[str]) -> str:
    """The first capture of `pattern` in the first of `texts` that has one, else ""."""
    for text in texts:
        if match := pattern.search(text):
            return match.group(1)
    return ""


@dataclass(frozen=True)
class Instruction:
    """One instruction of the optimised HLO: what XLA runs, and which TF op it came from."""

    opcode: str
    op_type: str  # the TF op (metadata), "" when XLA made it up
    op_name: str  # the TF op's full name: model/layer/.../op, gradient_tape/... for backward
    body: str  # the text of the computation it calls (fusions, calls), "" otherwise


def parse_hlo(text: str) -> dict[str, Instruction]:
    """Every instruction of an HLO module's text by name, with its callee's body attached."""
    bodies: dict[str, list[str]] = {}
    current = None
    raw: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = bodies.setdefault(header.group("name"), [])
            continue
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        if current is not None:
            current.append(line)
        raw[match.group("name")] = (match.group("opcode"), match.group("rest"))
    instructions = {}
    for name, (opcode, rest) in raw.items():
        callee = re.search(r"(?:calls|to_apply)=%([\w.\-]+)", rest)
        body = "\n".join(bodies.get(callee.group(1), ())) if callee else ""
        # a fusion XLA made carries no metadata itself: take its root's, else any of its body's
        root = re.search(r"ROOT .*$", body, re.M)
        sources = [rest, root.group(0) if root else "", body]
        instructions[name] = Instruction(
            opcode, _first(_OP_TYPE, sources), _first(_OP_NAME, sources), body
        )
    return instructions


def kind_of(instruction: Instruction | None, name: str) -> str:
    """Which of KINDS a thunk's work is."""
    if instruction is None:
        return RUNTIME
    body = instruction.body
    if instruction.opcode in ("dot", "convolution") or re.search(r" (dot|convolution)\(", body):
        return MATMUL
    if instruction.op_type.startswith(_RANDOM_OPS) or "rng-bit-generator(" in body:
        return RANDOM
    if all(f" {op}(" in body for op in ("iota", "xor", "shift-right-logical")):
        return RANDOM  # Threefry's rounds on a counter, fused by XLA without TF metadata
    if instruction.opcode in ("reduce", "reduce-window") or re.search(r" reduce(-window)?\(", body):
        return REDUCE
    if instruction.opcode in ("transpose", "copy") or name.startswith(("transpose", "copy")):
        return LAYOUT
    return ELEMENTWISE


OUTSIDE = "(optimizer, loss, metrics)"


def layer_of(op_name: str, model_scope: str) -> str:
    """ "gradient_tape/vit_lsa_1/block3_attn_1/dropout_1/..." -> "attn/dropout": the layer kind
    with block numbers and Keras' name suffixes dropped, backward ops counted with their layer,
    dropout split out. `model_scope` is the model's name scope ("vit_lsa_1")."""
    if not op_name:
        return "(no TF op)"
    parts = op_name.removeprefix("gradient_tape/").split("/")
    if parts[0] != model_scope or len(parts) < 2:
        return OUTSIDE
    layer = re.sub(r"_\d+$", "", re.sub(r"(stage|block)\d+_", "", parts[1]))
    return f"{layer}/dropout" if any("dropout" in p for p in parts[2:]) else layer


def model_scope(instructions: dict[str, Instruction]) -> str:
    """The model's name scope: the one most gradient ops sit in (the optimizer's ops may
    outnumber the model's in a small model, but have no gradient)."""
    scopes = Counter(
        i.op_name.split("/")[1]
        for i in instructions.values()
        if i.op_name.startswith("gradient_tape/") and i.op_name.count("/") >= 2
    )
    return scopes.most_common(1)[0][0] if scopes else ""


def thunk_times(xplane: Path, steps: int) -> Counter:
    """ms per step of each thunk (by name) on XLA's worker threads."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(xplane.read_bytes())
    times: Counter = Counter()
    for plane in space.planes:
        for line in plane.lines:
            if "Eigen" not in line.name:  # XLA's intra-op pool: tf_numa_-1_Eigen/...
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if not name.startswith("ThunkExecutor"):  # the executor's span around thunks
                    times[name] += event.duration_ps / 1e9 / steps
    return times


def breakdown(times: Counter, instructions: dict[str, Instruction]) -> dict[str, Counter]:
    """Thunk times summed by kind, by layer and by TF op type."""
    by = {"kind": Counter(), "layer": Counter(), "op_type": Counter()}
    scope = model_scope(instructions)
    for name, ms in times.items():
        instruction = instructions.get(name)
        kind = kind_of(instruction, name)
        by["kind"][kind] += ms
        layer = layer_of(instruction.op_name, scope) if instruction else "(runtime)"
        by["layer"][f"{layer}: {kind}" if layer == "(no TF op)" else layer] += ms
        op = (instruction.op_type or instruction.opcode) if instruction else "(runtime)"
        by["op_type"][op] += ms
    return by


def dump_hlo_to_temp() -> Path:
    """Have XLA write its optimised HLO under a new temporary folder; returns the folder.
    Call before XLA compiles anything (its flags are read once)."""
    dump = Path(tempfile.mkdtemp(prefix="step_profile_"))
    os.environ["XLA_FLAGS"] = (
        f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump / 'hlo'} --xla_dump_hlo_as_text"
    )
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return dump


def profile_step(dump: Path, model_name: str, preset_name: str, batch: int | None, steps: int):
    """Compile the `toolkit train --jit` step (the synthetic data and learning-rate schedule of
    studies.train_throughput), profile `steps` steps; the breakdown as JSON."""
    import math

    import numpy as np
    import tensorflow as tf

    from studies.train_throughput import INPUT_SHAPE, NUM_CLASSES, TRAIN_IMAGES
    from toolkit.data import train_dataset
    from toolkit.models import build_model, channel_stats, get_preset
    from toolkit.training.train import compile_model

    preset = get_preset(model_name, preset_name)
    batch = batch or preset.train.batch_size
    classes = NUM_CLASSES[model_name]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (batch * (steps + 3), *INPUT_SHAPE), dtype=np.uint8)
    y = rng.integers(0, classes, len(x)).astype(np.int64)
    norm = channel_stats(x) if model_name != "shiftvit" else None
    model = build_model(preset, INPUT_SHAPE, classes, norm_stats=norm)
    compile_model(model, preset, math.ceil(TRAIN_IMAGES[model_name] / batch), jit=True)
    dataset = train_dataset(x, y, batch, preset.train.augmentation, 0).repeat()
    print(f"compiling the {model_name} {preset_name} train step ...", file=sys.stderr, flush=True)
    model.fit(dataset, epochs=1, steps_per_epoch=2, verbose=0)  # trace and compile
    print(f"profiling {steps} steps ...", file=sys.stderr, flush=True)
    tf.profiler.experimental.start(str(dump / "trace"))
    start = time.perf_counter()
    model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
    wall = (time.perf_counter() - start) / steps
    tf.profiler.experimental.stop()
    modules = sorted((dump / "hlo").glob("*one_step_on*cpu_after_optimizations.txt"))
    if not modules:
        raise RuntimeError(f"XLA wrote no optimised train-step module under {dump / 'hlo'}")
    instructions = parse_hlo(max(modules, key=lambda p: p.stat().st_size).read_text())
    traces = sorted((dump / "trace").rglob("*.xplane.pb"))
    if not traces:
        raise RuntimeError(f"the TensorFlow profiler wrote no trace under {dump / 'trace'}")
    by = breakdown(thunk_times(traces[-1], steps), instructions)
    return {
        "model": model_name,
        "preset": preset_name,
        "batch": batch,
        "steps": steps,
        "wall_ms_per_step": round(wall * 1e3, 1),
        "images_per_s": round(batch / wall, 1),
        "thunk_ms_per_step": round(sum(by["kind"].values()), 1),
        **{key: {k: round(v, 2) for k, v in c.most_common()} for key, c in by.items()},
    }


def markdown(report: dict, top: int = 12) -> str:
    """The three breakdowns as Markdown tables (share of the step's thunk time)."""
    total = report["thunk_ms_per_step"]
    lines = [
        f"### {report['model']} `{report['preset']}`, batch {report['batch']}: "
        f"{report['wall_ms_per_step']} ms per step wall ({report['images_per_s']} images/s), "
        f"{total} ms of thunk time",
    ]
    titles = {"kind": "kind of work", "layer": "layer", "op_type": "TF op (or HLO opcode)"}
    for key, title in titles.items():
        rows = list(report[key].items())
        if key == "kind":
            rows.sort(key=lambda r: KINDS.index(r[0]))
        lines += ["", f"| {title} | ms per step | share |", "|---|---:|---:|"]
        lines += [f"| {k} | {v:.1f} | {v / total:.1%} |" for k, v in rows[:top]]
        if len(rows) > top:
            rest = sum(v for _, v in rows[top:])
            lines.append(f"| ({len(rows) - top} more) | {rest:.1f} | {rest / total:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m studies.step_profile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="vit-lsa")
    parser.add_argument("--preset", default="seed")
    parser.add_argument("--batch-size", type=int, default=64, help="0: the preset's")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps")
    parser.add_argument("--json", type=Path, help="write the breakdown as JSON")
    parser.add_argument("--md", type=Path, help="write the breakdown as Markdown")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 0:
        parser.error("--steps must be >= 1 and --batch-size >= 0")
    for out in (args.json, args.md):
        if out is not None and not out.parent.is_dir():
            parser.error(f"{out.parent} is not a folder: create it or write elsewhere")
    dump = dump_hlo_to_temp()  # before anything imports TensorFlow
    from studies.train_throughput import NUM_CLASSES
    from toolkit.bench.machine import cpu_flags, cpu_model, cpu_text
    from toolkit.common.versions import versions

    if args.model not in NUM_CLASSES:
        parser.error(f"unknown model {args.model!r}: choose from {', '.join(NUM_CLASSES)}")
    try:
        report = profile_step(dump, args.model, args.preset, args.batch_size or None, args.steps)
    finally:
        shutil.rmtree(dump, ignore_errors=True)  # the HLO dump and trace: ~11 MB a run
    cpu = cpu_text({"cpu": cpu_model(), "cpu_flags": cpu_flags()})
    report["machine"] = f"{cpu}, {os.cpu_count()} cores"
    report["versions"] = {k: v for k, v in versions().items() if v != "missing"}
    report["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    report["command"] = "python -m studies.step_profile " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    text = markdown(report)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.md:
        args.md.write_text(
            f"{text}\n- Command: `{report['command']}`, {report['date']}\n"
            f"- Machine: {report['machine']}\n"
            f"- Versions: {', '.join(f'{k} {v}' for k, v in report['versions'].items())}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
