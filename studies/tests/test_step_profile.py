"""studies.step_profile: HLO parsing and the work-kind rules on a hand-written module,
and the whole profile of a tiny compiled step in a subprocess."""

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from studies.step_profile import (
    ELEMENTWISE,
    KINDS,
    LAYOUT,
    MATMUL,
    OUTSIDE,
    RANDOM,
    REDUCE,
    RUNTIME,
    breakdown,
    kind_of,
    layer_of,
    model_scope,
    parse_hlo,
)

# a trimmed optimised-HLO dump in XLA's text format: one thunk of each kind
HLO = """HloModule a_inference_one_step_on_data_1

%fused_threefry (param_0: u64[2]) -> u32[4,8] {
  %param_0 = u64[2]{0} parameter(0)
  %iota.1 = u64[4,8]{1,0} iota(), iota_dimension=1
  %shift.1 = u64[4,8]{1,0} shift-right-logical(%iota.1, %iota.1)
  ROOT %xor.1 = u32[4,8]{1,0} xor(%shift.1, %shift.1)
}

%fused_sum (param_0.1: f32[64,144,64]) -> f32[64] {
  %param_0.1 = f32[64,144,64]{2,1,0} parameter(0)
  ROOT %reduce.1 = f32[64]{0} reduce(%param_0.1, %c), dimensions={0,1}, to_apply=%add, \
metadata={op_type="BiasAddGrad" op_name="gradient_tape/vit_lsa_1/block2_mlp_1/dense_0_1/BiasAdd"}
}

%fused_gelu (param_0.2: f32[8]) -> f32[8] {
  %param_0.2 = f32[8]{0} parameter(0)
  ROOT %multiply.1 = f32[8]{0} multiply(%param_0.2, %param_0.2), \
metadata={op_type="Mul" op_name="vit_lsa_1/block0_mlp_1/dense_0_1/Gelu/mul"}
}

ENTRY %a_inference_one_step_on_data_1 (arg0.1: f32[64,144,64]) -> f32[] {
  %MatMul.7 = f32[64,144,256]{2,1,0} dot(%a, %b), lhs_contracting_dims={2}, \
metadata={op_type="MatMul" op_name="vit_lsa_1/block0_attn_1/query_1/Tensordot/MatMul"}
  %concatenate_bitcast_fusion.3 = u32[4,8]{1,0} fusion(%s), kind=kLoop, calls=%fused_threefry
  %call.2 = (u64[2]{0}, u32[4,8]{1,0}) call(%s), to_apply=%rng.1, \
metadata={op_type="StatelessRandomUniformFullIntV2" \
op_name="vit_lsa_1/block3_attn_1/dropout_1/stateless_random_uniform"}
  %ynn_fusion.4 = f32[64]{0} fusion(%g, %c), kind=kCustom, calls=%fused_sum
  %transpose_copy_fusion.5 = f32[64,4,144,64]{3,2,1,0} fusion(%d), kind=kLoop, calls=%x, \
metadata={op_type="Transpose" op_name="gradient_tape/vit_lsa_1/block5_attn_1/transpose_1/t"}
  ROOT %multiply_fusion.6 = f32[8]{0} fusion(%e), kind=kLoop, calls=%fused_gelu
}
"""


def test_parse_hlo_reads_opcode_metadata_and_callee():
    instructions = parse_hlo(HLO)
    dot = instructions["MatMul.7"]
    assert (dot.opcode, dot.op_type) == ("dot", "MatMul")
    assert dot.op_name.endswith("query_1/Tensordot/MatMul")
    assert instructions["call.2"].opcode == "call"  # a tuple-typed result
    # a fusion without metadata takes its root's
    assert instructions["multiply_fusion.6"].op_type == "Mul"
    assert instructions["ynn_fusion.4"].op_type == "BiasAddGrad"
    assert "reduce(" in instructions["ynn_fusion.4"].body


def test_every_thunk_gets_its_kind():
    instructions = parse_hlo(HLO)
    kinds = {name: kind_of(instructions.get(name), name) for name in instructions}
    assert kinds["MatMul.7"] == MATMUL
    assert kinds["concatenate_bitcast_fusion.3"] == RANDOM  # Threefry fused, no TF metadata
    assert kinds["call.2"] == RANDOM
    assert kinds["ynn_fusion.4"] == REDUCE
    assert kinds["transpose_copy_fusion.5"] == LAYOUT
    assert kinds["multiply_fusion.6"] == ELEMENTWISE
    assert kind_of(None, "SlinkyThreadPool::Await") == RUNTIME


@pytest.mark.parametrize(
    "op_name, layer",
    [
        ("vit_lsa_1/block3_attn_1/dropout_1/stateless_random_uniform", "attn/dropout"),
        ("gradient_tape/vit_lsa_1/block5_attn_1/transpose_1/t", "attn"),
        ("gradient_tape/vit_lsa_1/head_mlp_1/dense_0_1/MatMul", "head_mlp"),
        ("gradient_tape/shiftvit_1/stage3_block1_mlp_1/dense_0_1/MatMul", "mlp"),
        ("AdamW/mul", OUTSIDE),
        ("vit_lsa_1", OUTSIDE),
        ("", "(no TF op)"),
    ],
)
def test_layer_of(op_name, layer):
    scope = "shiftvit_1" if "shiftvit" in op_name else "vit_lsa_1"
    assert layer_of(op_name, scope) == layer


def test_breakdown_adds_up():
    instructions = parse_hlo(HLO)
    times = Counter({"MatMul.7": 3.0, "call.2": 1.0, "ynn_fusion.4": 0.5, "Await": 0.25})
    by = breakdown(times, instructions)
    for table in by.values():
        assert sum(table.values()) == pytest.approx(4.75)
    assert by["kind"][MATMUL] == 3.0 and by["kind"][RUNTIME] == 0.25
    assert by["layer"]["attn"] == 3.0 and by["layer"]["attn/dropout"] == 1.0
    assert by["op_type"]["BiasAddGrad"] == 0.5
    assert model_scope(instructions) == "vit_lsa_1"


def test_profiles_a_compiled_tiny_step(tmp_path):
    out = tmp_path / "p.json"
    argv = ["--model", "vit-lsa", "--preset", "tiny", "--batch-size", "8", "--steps", "2"]
    temp = tmp_path / "temp"  # where the HLO dump and the trace go, then are removed
    temp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "studies.step_profile", *argv, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not [p.name for p in temp.iterdir() if p.name.startswith("step_profile_")]
    report = json.loads(out.read_text())
    assert set(report["kind"]) <= set(KINDS)
    total = report["thunk_ms_per_step"]
    assert sum(report["kind"].values()) == pytest.approx(total, abs=0.1)
    assert report["kind"][MATMUL] > 0.2 * total  # a transformer step is matmul first
    assert report["kind"].get(RUNTIME, 0.0) < 0.5 * total  # the thunks were found in the HLO
    assert "attn" in report["layer"] and "| kind of work |" in proc.stdout


def test_unwritable_output_is_refused_before_profiling(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "studies.step_profile", "--md", str(tmp_path / "no/p.md")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "is not a folder" in proc.stderr
