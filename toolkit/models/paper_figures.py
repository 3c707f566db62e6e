"""The papers' own figures for the presets that reproduce their models: the name, parameters,
FLOPs and top-1 of each in its paper's table (`toolkit presets` and docs/presets.md set the
toolkit's counts beside them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperFigures:
    """A preset's row in its paper's table: the model's name there, parameters in millions
    (None: the table gives none), FLOPs in billions (multiply-accumulates, as Swin and ShiftViT
    count them) and top-1 (%)."""

    name: str
    params_m: float | None
    gflops: float
    top1: float


# (model, preset) -> its paper's figures.
# The ShiftViT paper's ImageNet-1k table (224x224 input); Shift-T/light, Shift-T and Shift-S
# are also in the official README's table (microsoft/SPACH), with their checkpoints.
# The SPT/LSA paper's CIFAR-10 top-1 and FLOPs, from its code's README (aanna0701/SPT_LSA_ViT:
# "ViT" and "SL-ViT"; no parameter counts there). Those FLOPs are its Tiny-ImageNet model's
# (64x64, patch 8, 200 classes): the code's matmul MACs there are 189.5 M and 199.0 M, at
# CIFAR-10's 32x32 187.7 M and 190.1 M (tests/test_paper_cifar.py).
PAPER_FIGURES: dict[tuple[str, str], PaperFigures] = {
    ("shiftvit", "shift-t-light"): PaperFigures("Shift-T/light", 20, 3.0, 79.4),
    ("shiftvit", "shift-t"): PaperFigures("Shift-T", 29, 4.5, 81.7),
    ("shiftvit", "shift-s"): PaperFigures("Shift-S", 50, 8.8, 82.8),
    ("shiftvit", "shift-b"): PaperFigures("Shift-B", 89, 15.6, 83.3),
    ("vit", "paper-cifar"): PaperFigures("ViT", None, 0.1898, 93.58),
    ("vit-lsa", "paper-cifar"): PaperFigures("SL-ViT", None, 0.1992, 94.53),
}
