"""Keep TensorFlow's Python-side warnings (tf.function retracing) off the verify tables."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_tensorflow() -> Iterator[None]:
    """Raise the `tensorflow` logger to ERROR for the block: each verified op model is a new
    Keras model, which TensorFlow reports as excessive retracing."""
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
