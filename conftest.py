"""Pytest setup of tests/ and studies/tests/: pick the Keras backend, import it quietly
and register the custom layers before any test imports Keras; mark the tests that train as `slow`.

TensorFlow unless TOOLKIT_TEST_BACKEND names another (the backend-neutral test modules are
run that way in a subprocess by tests/test_backends.py).
"""

import os
import sys
from pathlib import Path

os.environ["KERAS_BACKEND"] = os.environ.get("TOOLKIT_TEST_BACKEND", "tensorflow")
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
# JAX's compilation cache on disk, shared by every process of a test run (workers and the
# processes tests start): the tiny presets' train steps are compiled once, not in each of the
# ~30 JAX processes (a tiny JAX training: 24 s cold, 15 s with its steps cached). Entries are
# keyed by program, flags and versions, kept between runs; `make clean` removes them.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).parent / ".pytest_cache" / "jax-compiled")
)
# every program, not only those that compile in over a second (JAX's default): a JAX process
# compiles ~40 small ones (each weight's initializer, the eval and metric steps) worth ~20 CPU-s,
# which the next process of the run with the same model loads (a tiny training: 29 -> 10 CPU-s)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import pytest  # noqa: E402  (after the backend is chosen)

from toolkit.common.backend import backend_installed  # noqa: E402
from toolkit.keras_setup import setup_keras  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "tests"))  # as pytest puts it for tests/ itself
from suite_order import LONGEST_FIRST  # noqa: E402  (tests/suite_order.py)
from tiny_runs import TinyRuns  # noqa: E402  (tests/tiny_runs.py, for studies/tests too)

if backend_installed(os.environ["KERAS_BACKEND"]):
    setup_keras()  # TensorFlow imported quietly; the custom layers registered for safe_mode


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> TinyRuns:
    """Tiny runs trained and exported once for the session (tests/tiny_runs.py); under
    pytest-xdist in one folder beside the workers' own, which they share."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return TinyRuns(tmp_path_factory.mktemp("tiny_runs"))
    return TinyRuns(tmp_path_factory.getbasetemp().parent / "tiny_runs")


# Fixtures that train a model (or export one): a test using one, directly or through another
# fixture, is `slow`. Modules whose every test trains or times set `pytestmark` instead.
TRAINING_FIXTURES = {
    *("exported", "run_folder", "artifacts", "resumed", "runs", "run_dir"),
    *("jax_runs", "tiny_run", "vit_run", "tiny_runs"),
}


def pytest_collection_modifyitems(config, items):
    """Mark `slow` every test that needs a trained model through a fixture; refuse a test both
    serial and slow; put the modules of LONGEST_FIRST first (the order within a module kept)."""
    for item in items:
        if TRAINING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    serial_slow = [
        i.nodeid for i in items if i.get_closest_marker("serial") and i.get_closest_marker("slow")
    ]
    if serial_slow:  # `make test` runs the serial tests in its quick part, alone
        raise pytest.UsageError(f"a serial test must be quick, not slow: {serial_slow[0]}")
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


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
