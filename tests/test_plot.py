"""bench.png: accuracy axis 0-100%, points keyed by a legend, no labels beside the points."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from bench.plot import figure, plot

RESULT = Path(__file__).resolve().parents[1] / "bench" / "results" / "bench_shiftvit-seed.json"


@pytest.fixture
def result() -> dict:
    return json.loads(RESULT.read_text())


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
