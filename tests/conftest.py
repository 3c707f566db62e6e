"""Pytest setup: pick the Keras backend and quiet TF before anything imports Keras.

TensorFlow unless TOOLKIT_TEST_BACKEND names another (the backend-neutral test modules are
run that way in a subprocess by tests/test_backends.py).
"""

import os

os.environ["KERAS_BACKEND"] = os.environ.get("TOOLKIT_TEST_BACKEND", "tensorflow")
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
