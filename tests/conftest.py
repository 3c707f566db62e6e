"""Pytest setup: pick the TensorFlow backend and quiet TF before anything imports Keras."""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
