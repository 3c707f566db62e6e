"""Pytest setup of tests/ and studies/tests/: pick the Keras backend and quiet TF before
anything imports Keras; mark the tests that train as `slow`.

TensorFlow unless TOOLKIT_TEST_BACKEND names another (the backend-neutral test modules are
run that way in a subprocess by tests/test_backends.py).
"""

import os

os.environ["KERAS_BACKEND"] = os.environ.get("TOOLKIT_TEST_BACKEND", "tensorflow")
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import pytest  # noqa: E402  (after the backend is chosen)

# Fixtures that train a model (or export one): a test using one, directly or through another
# fixture, is `slow`. Modules whose every test trains or times set `pytestmark` instead.
TRAINING_FIXTURES = {
    *("exported", "run_folder", "artifacts", "resumed", "runs", "run_dir"),
    *("jax_runs", "tiny_run", "vit_run"),
}


def pytest_collection_modifyitems(config, items):
    """Mark `slow` every test that needs a trained model through a fixture."""
    for item in items:
        if TRAINING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
