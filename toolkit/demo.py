"""`toolkit demo`: the tiny presets end to end on offline data, printing where outputs went."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from toolkit.evaluate import evaluate_run
from toolkit.training.train import TrainOptions, train

DEMO_MODELS = ("shiftvit", "vit-lsa")


def run_demo(data: str = "shapes", out: Path | None = None, epochs: int | None = None) -> Path:
    """Train and evaluate each demo model at the tiny preset; return the demo folder."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    root = Path(out) if out is not None else Path("runs") / f"demo-{stamp}"
    for model in DEMO_MODELS:
        run_dir = root / model
        print(f"== {model}: training the tiny preset on {data}", flush=True)
        train(TrainOptions(model=model, preset="tiny", data=data, epochs=epochs), out=run_dir)
        result = evaluate_run(run_dir)
        print(
            f"== {model}: test top-1 {result['top1']:.1%}, top-5 {result['top5']:.1%} "
            f"on {result['samples']} images",
            flush=True,
        )
        print(f"   run folder: {run_dir}")
        for name in ("model.keras", "config.json", "history.csv", "metrics.json", "labels.txt"):
            print(f"   {name:13s} -> {run_dir / name}")
    return root
