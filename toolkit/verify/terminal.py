"""A verify report as `toolkit verify` prints it: each level's table, the runtimes that could
not run and why, and the verdict."""

from __future__ import annotations

from toolkit.verify.layers.display import divergence_lines, layer_table
from toolkit.verify.levels import LEVEL_NAMES
from toolkit.verify.tables import (
    attribution_table,
    model_table,
    op_table,
    unavailable_reasons,
)


def print_report(report: dict) -> None:
    """The tables, the unavailable runtimes' reasons, and the verdict."""
    tol = report["tolerances"]
    for part, why in report["options"].get("skipped", {}).items():
        print(f"{LEVEL_NAMES[part]} level: not run: {why}")
    if "ops" in report:
        ops = report["ops"]
        print(f"op level ({ops['shapes']} shapes, batch 2, {ops['seconds']:.0f} s)")
        print(op_table(ops))
        print(
            f"fp32: max abs error vs NumPy float64 (shift/patches exact, spt/lsa <= "
            f"{tol['atol_fp32']:g}, blocks <= {tol['atol_fp32'] * tol['block_factor']:g}); "
            f"int8: max abs error in output quantization steps (data movement <= "
            f"{tol['movement_int8_steps']:g}, others <= {tol['int8_steps']:g})"
        )
    if "models" in report:
        models = report["models"]
        print()
        print(
            f"model level: {models['samples']} test images of {models['data']}, vs Keras "
            f"(top-1 {models['reference']['top1_accuracy']:.1%}; {models['seconds']:.0f} s)"
        )
        print(model_table(models))
    attribution = report.get("int8_attribution")
    if attribution:
        print()
        if "error" in attribution:
            print(f"int8 attribution: {attribution['error']}")
        else:
            print(
                f"int8 attribution (QuantizationDebugger, {attribution['debug_samples']} "
                f"images; rmse/scale, rounding alone = 0.29; top {len(attribution['top'])} "
                f"of {len(attribution['layers'])} layers)"
            )
            print(attribution_table(attribution))
    layers = report.get("layers")
    if layers:
        print(
            f"layer level: {layers['samples']} test images of {layers['data']}, "
            f"{len(layers['boundaries'])} boundaries vs Keras ({layers['seconds']:.0f} s)"
        )
        print(layer_table(layers))
        print(
            "SQNR in dB vs the Keras tensor (int8: + max error in steps of the tensor's own "
            "scale, fp: a float tensor inside the int8 model); -: not found in the artifact"
        )
        print()
        for line in divergence_lines(layers):
            print(line)
    cells = [
        c for part in ("ops", "models", "layers") for c in report.get(part, {}).get("cells", [])
    ]
    for line in unavailable_reasons(cells):
        print(f"unavailable: {line}")
    print()
    if report["passed"]:
        print(f"verify: PASSED ({len(cells)} cells)")
        return
    print(f"verify: FAILED ({len(report['failures'])} of {len(cells)} cells)")
    for line in report["failures"]:
        print(f"  {line}")
