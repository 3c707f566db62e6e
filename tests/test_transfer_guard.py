"""The device-resident train step never waits on the host (issue 72): on JAX, a
`paper-cifar`-shaped training runs its steps after the first under transfer guards that refuse
every implicit transfer, and its compiled step calls nothing on the host; a host round trip
put into the step is caught and named (tests/transfer_guard_check.py runs the training)."""

from __future__ import annotations

import json

import pytest
from jax_subprocess import run_without_tensorflow

from toolkit.common.backend import installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not installed("jax"), reason="jax not installed: pip install -e '.[dev]'"),
]


@pytest.fixture(scope="module")
def results() -> dict:
    modes = ["none", "host-round-trip", "debug-callback"]
    proc = run_without_tensorflow(["-m", "transfer_guard_check", *modes])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_device_resident_step_transfers_nothing_and_calls_no_host(results):
    clean = results["none"]
    assert clean == {"steps": 4, "guarded": 3, "host_callbacks": [], "error": None}


def test_a_host_round_trip_in_the_step_is_refused_and_named(results):
    caught = results["host-round-trip"]
    assert caught["guarded"] == 1 and caught["steps"] == 1  # the first guarded step stops
    assert "Disallowed host-to-device transfer" in caught["error"]
    assert "float32[]" in caught["error"]  # the loss, on its way back


def test_a_debug_callback_in_the_model_shows_in_the_compiled_step(results):
    assert results["debug-callback"]["host_callbacks"]  # e.g. xla_ffi_python_cpu_callback
    assert results["none"]["host_callbacks"] == []
