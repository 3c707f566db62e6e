"""ShiftViT's `norm` and `activation` fields (the official code's norm_layer / act_layer):
the layers they build, the NumPy reference of the MLP's ReLU, saving, and the choices."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest

from toolkit.common.errors import UsageError
from toolkit.models import build_model, get_preset
from toolkit.models.architectures import ShiftViTArch
from toolkit.models.counts import fingerprint
from toolkit.models.overrides import parse_arch
from toolkit.ops import MLP
from toolkit.ops.mlp import ACTIVATIONS
from toolkit.verify.ops.reference import mlp as reference_mlp


def _preset(**fields):
    preset = get_preset("shiftvit", "tiny")
    return dataclasses.replace(preset, arch=dataclasses.replace(preset.arch, **fields))


def test_the_field_choices_are_what_the_layers_take():
    choices = {f.name: f.metadata.get("choices") for f in dataclasses.fields(ShiftViTArch)}
    assert choices["activation"] == tuple(ACTIVATIONS)
    assert parse_arch("shiftvit", "norm=batch,activation=relu") == {
        "norm": "batch",
        "activation": "relu",
    }
    with pytest.raises(UsageError, match="layer or batch"):
        parse_arch("shiftvit", "norm=group")


def test_the_defaults_leave_the_fingerprint_a_batchnorm_changes_it():
    """Added fields at their defaults leave the architecture's fingerprint (its shipped counts)."""
    preset = get_preset("shiftvit", "tiny")
    assert fingerprint(_preset(norm="layer", activation="gelu")) == fingerprint(preset)
    assert fingerprint(_preset(norm="batch")) != fingerprint(preset)


NORMS = {"layer": keras.layers.LayerNormalization, "batch": keras.layers.BatchNormalization}


@pytest.mark.parametrize("norm", list(NORMS))
def test_norm_builds_its_layer_everywhere_a_norm_was(norm):
    model = build_model(_preset(norm=norm), (32, 32, 3), 10)
    norms = [layer for layer in model.layers if isinstance(layer, tuple(NORMS.values()))]
    # one per block, one per patch merging, the head's: tiny is blocks 1-1-2-1
    assert len(norms) == 5 + 3 + 1
    assert all(isinstance(layer, NORMS[norm]) for layer in norms)


def test_relu_mlp_matches_its_reference():
    layer = MLP([16, 8], activate_last=False, activation="relu")
    x = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    got = np.asarray(layer(x))
    np.testing.assert_allclose(got, reference_mlp(x.astype(np.float64), layer), atol=1e-5)
    assert MLP.from_config(layer.get_config()).activation == "relu"


def test_a_batchnorm_relu_shiftvit_saves_and_loads_safely(tmp_path):
    model = build_model(_preset(norm="batch", activation="relu"), (32, 32, 3), 10)
    model.save(tmp_path / "model.keras")
    again = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    x = np.random.default_rng(1).integers(0, 256, (2, 32, 32, 3)).astype("float32")
    np.testing.assert_array_equal(model.predict(x, verbose=0), again.predict(x, verbose=0))
