"""bench.png: accuracy axis 0-100%, points keyed by a legend, no labels beside the points."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from toolkit.bench.plot import figure, plot

# (format, runtime, p50 ms, top-1, size in bytes) of a bench.json's batch-1 rows
ROWS = [
    ("keras", "keras", 31.0, 0.482, 46_900_000),
    ("onnx", "ort-cpu", 4.1, 0.482, 46_800_000),
    ("onnx-int8", "ort-cpu", 2.7, 0.480, 12_100_000),
    ("tflite", "litert", 3.6, 0.482, 46_800_000),
    ("tflite-fp16", "litert", 3.5, 0.482, 23_500_000),
    ("tflite-dynamic", "litert", 2.1, 0.479, 12_000_000),
    ("tflite-int8", "litert", 1.4, 0.476, 11_800_000),
]


@pytest.fixture
def result() -> dict:
    """A bench.json as `toolkit bench --batch 1,32` writes it (the plot reads batch 1), with a
    failed row and a batch-32 row that must not be plotted."""
    rows = [
        {
            "format": f,
            "runtime": r,
            "batch": 1,
            "status": "ok",
            "p50_ms": ms,
            "top1": top1,
            "size_bytes": size,
        }
        for f, r, ms, top1, size in ROWS
    ]
    rows.append({"format": "onnx", "runtime": "ort-cuda", "batch": 1, "status": "unavailable"})
    rows.append({**rows[1], "batch": 32, "p50_ms": 60.0})
    return {"model": "shiftvit", "preset": "seed", "protocol": {"batches": [1, 32]}, "rows": rows}


def test_every_point_is_in_the_legend_and_no_text_sits_beside_the_points(result):
    fig = figure(result)
    ax = fig.axes[0]
    assert ax.get_ylim() == (0, 100)
    assert not ax.texts  # no annotations to overlap
    rows = [r for r in result["rows"] if r["status"] == "ok" and r["batch"] == 1]
    plotted = sorted(tuple(o.get_offsets()[0]) for o in ax.collections)
    expected = sorted((r["p50_ms"], 100 * r["top1"]) for r in rows)
    assert [v for p in plotted for v in p] == pytest.approx([v for p in expected for v in p])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for name in {r["runtime"] for r in rows} | {r["format"] for r in rows}:
        assert any(label == name or label.startswith(f"{name} (") for label in labels), name
    plt.close(fig)


def test_rows_without_top1_are_left_out_and_counted(result, tmp_path):
    for row in [r for r in result["rows"] if r["batch"] == 1 and r["status"] == "ok"][:3]:
        row["top1"] = None
    fig = figure(result)
    assert "3 timed rows without top-1" in fig.axes[0].get_xlabel()
    plt.close(fig)
    plot(result, tmp_path / "bench.png")
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
