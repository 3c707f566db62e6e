"""Keras set up for the toolkit: TensorFlow imported without its start-up log lines (when it is
the backend) and every custom object registered, so ``keras.saving.load_model(path,
safe_mode=True)`` needs no ``custom_objects``. Called by each stage that builds or loads a model,
never at ``import toolkit``: the commands that need no Keras start without it."""

from __future__ import annotations

import os

from toolkit.backend import backend_installed


def setup_keras() -> None:
    """Import Keras on its backend (quietly for TensorFlow) and register the custom objects."""
    if os.environ.get("KERAS_BACKEND") == "tensorflow" and backend_installed("tensorflow"):
        from toolkit.quiet_import import import_tensorflow_quietly

        import_tensorflow_quietly()
    import toolkit.models.position  # noqa: F401  (registers the position embeddings)
    import toolkit.ops  # noqa: F401  (registers every custom layer)
    import toolkit.training.losses  # noqa: F401  (registers the label-smoothing loss)
    import toolkit.training.schedule  # noqa: F401  (registers the learning-rate schedule)
