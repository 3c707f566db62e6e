"""Top-1 of an artifact and its agreement with the Keras model, counted by hand."""

import numpy as np
import pytest

from toolkit.accuracy import top1, top1_vs_reference


def test_top1_vs_reference_counts_hits_and_agreement():
    reference = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 2], [2, 0, 1]], np.float32)  # 0 1 2 0
    logits = np.array([[2, 1, 0], [2, 0, 1], [1, 0, 2], [0, 2, 1]], np.float32)  # 0 0 2 1
    labels = np.array([0, 1, 2, 1])
    # Keras right on images 0, 1, 2; the artifact on 0, 2, 3; the same class on 0 and 2
    assert top1_vs_reference(logits, reference, labels) == {
        "top1_accuracy": 0.75,
        "reference_top1_accuracy": 0.75,
        "top1_delta": 0.0,
        "top1_agreement": 0.5,
    }
    assert top1(logits[:2], labels[:2]) == 0.5
    worse = top1_vs_reference(logits[:2], reference[:2], labels[:2])
    assert worse["top1_delta"] == -0.5 and worse["top1_agreement"] == 0.5


def test_no_images_and_mismatched_logits():
    empty = np.zeros((0, 3), np.float32)
    assert top1_vs_reference(empty, empty, np.zeros(0)) == {
        "top1_accuracy": 0.0,
        "reference_top1_accuracy": 0.0,
        "top1_delta": 0.0,
        "top1_agreement": 1.0,
    }
    with pytest.raises(ValueError, match="differ"):
        top1_vs_reference(np.zeros((2, 3)), np.zeros((2, 4)), np.zeros(2))
