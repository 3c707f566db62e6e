"""Top-1 of an artifact's logits on labelled images, and how far it follows the Keras model's.

One home for the scores that the int8 search, `toolkit verify` and the bench accuracy table
all report about an exported artifact against the run's Keras model on the same images.
"""

from __future__ import annotations

import numpy as np

MAX_DROP_POINTS = 100.0  # top-1 points: no accuracy drop can be larger (--max-accuracy-drop)


def top1(logits: np.ndarray, labels: np.ndarray) -> float:
    """Share of images whose highest logit is at their label (0.0 for no images)."""
    labels = np.asarray(labels)
    return float(np.mean(np.argmax(logits, axis=1) == labels)) if len(labels) else 0.0


def tied_top1(scores: np.ndarray) -> np.ndarray:
    """Per image, whether its two highest scores are equal (argmax then takes the first)."""
    scores = np.asarray(scores)
    if scores.shape[-1] < 2:
        return np.zeros(scores.shape[:-1], bool)
    top2 = np.sort(scores, axis=-1)[..., -2:]
    return top2[..., 0] == top2[..., 1]


def top1_vs_reference(logits: np.ndarray, reference: np.ndarray, labels: np.ndarray) -> dict:
    """Top-1 of `logits` and of the `reference` (Keras) logits on `labels`, their difference
    (top1_delta, negative: the artifact is worse) and top1_agreement: the share of images whose
    top-1 class is the reference's, right or wrong (1.0 for no images)."""
    if np.shape(logits) != np.shape(reference):
        raise ValueError(f"logits {np.shape(logits)} and reference {np.shape(reference)} differ")
    accuracy, reference_accuracy = top1(logits, labels), top1(reference, labels)
    same = np.argmax(logits, axis=1) == np.argmax(reference, axis=1)
    return {
        "top1_accuracy": accuracy,
        "reference_top1_accuracy": reference_accuracy,
        "top1_delta": accuracy - reference_accuracy,
        "top1_agreement": float(np.mean(same)) if len(same) else 1.0,
    }
