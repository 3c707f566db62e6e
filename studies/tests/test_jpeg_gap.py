"""The JPEG-gap study pairs each original image with its JPEG q75 copy by nearest pixels."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from studies.jpeg_gap import MIN_PSNR, pair


def _jpeg(image: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=75)
    return np.asarray(Image.open(buffer).convert("RGB"))


def test_pair_finds_each_jpeg_copy_among_shuffled_images_of_its_class():
    g = np.random.default_rng(0)
    # smooth random images (upsampled 8x8 noise): JPEG keeps them near 30 dB, as CIFAR-10
    small = g.integers(0, 256, (40, 8, 8, 3), dtype=np.uint8)
    originals = np.stack([np.asarray(Image.fromarray(s).resize((32, 32))) for s in small])
    labels = np.arange(40) % 4
    order = g.permutation(40)
    jpegs, jpeg_labels = np.stack([_jpeg(originals[i]) for i in order]), labels[order]
    keep = np.arange(40) % 5 != 0  # a fifth of the originals have no copy among the JPEGs
    found = pair(originals, labels, jpegs[keep[order]], jpeg_labels[keep[order]])
    assert sorted(o for o, _, _ in found) == list(np.flatnonzero(keep))
    copies = order[keep[order]]
    for o, j, db in found:
        assert copies[j] == o and db >= MIN_PSNR
