"""Pytest setup of tests/ and studies/tests/: pick the Keras backend, import it quietly
and register the custom layers before any test imports Keras; mark the tests that train as `slow`.

TensorFlow unless TOOLKIT_TEST_BACKEND names another (the backend-neutral test modules are
run that way in a subprocess by tests/test_backends.py).
"""

import os
import sys

os.environ["KERAS_BACKEND"] = os.environ.get("TOOLKIT_TEST_BACKEND", "tensorflow")
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import pytest  # noqa: E402  (after the backend is chosen)

from toolkit.common.backend import backend_installed  # noqa: E402
from toolkit.keras_setup import setup_keras  # noqa: E402

if backend_installed(os.environ["KERAS_BACKEND"]):
    setup_keras()  # TensorFlow imported quietly; the custom layers registered for safe_mode

# Fixtures that train a model (or export one): a test using one, directly or through another
# fixture, is `slow`. Modules whose every test trains or times set `pytestmark` instead.
TRAINING_FIXTURES = {
    *("exported", "run_folder", "artifacts", "resumed", "runs", "run_dir"),
    *("jax_runs", "tiny_run", "vit_run", "tiny_runs"),
}


def pytest_collection_modifyitems(config, items):
    """Mark `slow` every test that needs a trained model through a fixture."""
    for item in items:
        if TRAINING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """End the process as soon as pytest has written everything, with its exit status.

    After a full run the interpreter's own finalization (TensorFlow's, XLA's and LiteRT's C++
    state: no Python frame is running) took 50-60 s after the summary line on a 2-core machine;
    nothing of the project's is left to flush or remove then (tmp_path folders are kept).
    """
    if EXIT_STATUS in config.stash:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(config.stash[EXIT_STATUS])
