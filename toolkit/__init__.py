"""Edge-deployment toolkit for attention-light vision transformers.

Importing the package registers every custom Keras object (layers, the learning-rate
schedule), so ``keras.saving.load_model(path, safe_mode=True)`` needs no ``custom_objects``.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from toolkit.quiet_import import import_tensorflow_quietly  # noqa: E402

import_tensorflow_quietly()

from toolkit import ops  # noqa: E402,F401
from toolkit.models import position  # noqa: E402,F401
from toolkit.training import schedule  # noqa: E402,F401

__version__ = "0.1.0"
