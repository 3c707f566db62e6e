"""Each runtime's facts live in its registry row (toolkit/runtimes/__init__.py): the package
whose version it records, whether it loads Keras, where its weights sit, the roofline kernel
bench measures its peaks with. Every row states each; the tables that used them derive."""

from __future__ import annotations

import pytest

from toolkit.bench import roofline
from toolkit.common.versions import versions
from toolkit.runtimes import RUNTIMES
from toolkit.runtimes.base import Runtime
from toolkit.ship.stages import bench_packages
from toolkit.ship.targets import TARGETS
from toolkit.verify.parity import runtime_version


def test_a_runtime_row_without_its_facts_is_refused():
    with pytest.raises(TypeError, match="package"):
        Runtime("new", (".new",), lambda path, options: None)


@pytest.mark.parametrize("name", RUNTIMES)
def test_every_runtime_row_states_facts_its_users_can_use(name):
    row = RUNTIMES[name]
    assert row.package is None or row.package in versions(), "a key of versions()"
    assert row.kernel is None or row.kernel in roofline.KERNEL_KINDS
    assert not row.host_memory or row.kernel is not None, "its weight-read rate needs a peak"
    assert row.loads_keras == (".keras" in row.suffixes)
    for precision in roofline.KERNEL_KINDS.get(row.kernel, {}):
        assert roofline.KERNELS[name, precision].runtime == name


def test_the_tables_that_used_the_facts_derive_from_the_rows():
    found = {"keras": "3", "litert": "2", "onnxruntime": "1"}
    assert runtime_version("ort-cuda", found) == "1" and runtime_version("litert", found) == "2"
    assert runtime_version("web-ort", found) is None  # the npm library's spec records it
    ranking = {r for target in TARGETS.values() for r in target.runtimes}
    assert set(bench_packages()) == {RUNTIMES[r].package for r in ranking} - {None}
    assert set(bench_packages()) == {"litert", "onnxruntime"}
