"""Progressive resizing: the ramp, its plan under a time budget, the model at a lower
resolution on the same weights, the recipe's checks and a run that climbs the ramp."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import replace
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.models import get_preset
from toolkit.models.architectures import ShiftViTArch
from toolkit.models.registry import MODELS
from toolkit.models.shiftvit import at_resolution, build_shiftvit
from toolkit.training import train as train_module
from toolkit.training.budget import plan_steps
from toolkit.training.checkpoint import Checkpoint, epochs_done
from toolkit.training.progressive import PhaseEnd
from toolkit.training.resolution import ResolutionRamp, pace_of, plan_ramp_steps


def test_the_ramp_rises_in_steps_of_eight_to_the_full_resolution_at_until():
    ramp = ResolutionRamp(start=16, until=0.5, full=32)
    assert [ramp.at(f) for f in (0.0, 0.24, 0.25, 0.49, 0.5, 1.0)] == [16, 16, 24, 24, 32, 32]
    assert ramp.phases() == [(0.0, 16), (0.25, 24), (0.5, 32)]
    odd = ResolutionRamp(start=20, until=0.8, full=36)  # START and full off the steps of 8
    assert [r for _, r in odd.phases()] == [20, 24, 32, 36]
    assert all(odd.at(start) == res for start, res in odd.phases())


def test_a_resolution_not_measured_is_paced_by_the_nearest_scaled_by_its_area():
    assert pace_of({32: 0.1}, 16) == pytest.approx(0.025)
    assert pace_of({16: 0.04, 32: 0.1}, 24) == pytest.approx(0.04 * (24 / 16) ** 2)
    assert pace_of({16: 0.04, 32: 0.1}, 32) == 0.1


@pytest.mark.parametrize("case", range(40))
def test_a_ramp_of_one_resolution_plans_as_a_run_without_one(case):
    rng = random.Random(case)
    seconds, step_seconds = rng.uniform(0, 500), rng.uniform(0.01, 2.0)
    epoch_end, per_epoch = rng.uniform(0, 10), rng.randint(1, 50)
    step, position = rng.randint(0, 1000), rng.randint(0, per_epoch - 1)
    flat = ResolutionRamp(start=32, until=0.5, full=32)
    planned = plan_ramp_steps(
        seconds, flat, {32: step_seconds}, epoch_end, per_epoch, step, position
    )
    assert planned - step == plan_steps(seconds, step_seconds, epoch_end, per_epoch, position)


def test_cheaper_early_phases_plan_more_steps_that_still_fit():
    ramp, seconds, per_epoch = ResolutionRamp(16, 0.5, 32), 600.0, 100
    paces = {16: 0.04, 24: 0.07, 32: 0.1}
    flat = plan_steps(seconds, paces[32], 2.0, per_epoch)
    planned = plan_ramp_steps(seconds, ramp, paces, 2.0, per_epoch, 0, switch_seconds=5.0)
    assert planned > 1.2 * flat
    # the plan's own time, step by step: each step at the resolution of its fraction
    spent = sum(paces[ramp.at(k / planned)] for k in range(planned))
    spent += -(-planned // per_epoch) * 2.0 + 2 * 5.0
    assert spent <= seconds + 1e-9
    assert plan_ramp_steps(0.0, ramp, paces, 2.0, per_epoch, planned) == planned  # none left


def test_a_run_already_at_a_higher_resolution_is_planned_at_it():
    """A plan that grew moves the ramp's fractions later; the run stays where it is."""
    ramp, paces = ResolutionRamp(16, 0.5, 32), {16: 0.04, 24: 0.07, 32: 0.1}
    at_full = plan_ramp_steps(300.0, ramp, paces, 2.0, 100, 1000, floor=32)
    assert at_full - 1000 == plan_steps(300.0, 0.1, 2.0, 100)
    assert plan_ramp_steps(300.0, ramp, paces, 2.0, 100, 1000) > at_full


@pytest.mark.parametrize("step, switch_to", [(10, None), (30, None), (60, 32)])
def test_a_phase_ends_only_where_the_resolution_rises(step, switch_to):
    phase = PhaseEnd(ResolutionRamp(16, 0.5, 32), resolution=24, fixed=100)
    phase.set_model(
        SimpleNamespace(optimizer=SimpleNamespace(iterations=step), stop_training=False)
    )
    phase.on_epoch_end(0)
    assert phase.switch_to == switch_to and phase.model.stop_training == (switch_to is not None)


def test_the_model_at_a_lower_resolution_shares_its_weights_and_resizes_first():
    arch = ShiftViTArch(image_size=32, patch_size=2, dim=24, depths=(1, 1), drop_path=0.0)
    model = build_shiftvit(arch, (32, 32, 3), 10)
    low = at_resolution(model, 16)
    assert all(a is b for a, b in zip(model.weights, low.weights, strict=True))
    assert low.input_shape == model.input_shape
    # the builder's own resize to 16 (a model of image size 16) with the same weights
    reference = build_shiftvit(replace(arch, image_size=16), (32, 32, 3), 10)
    reference.set_weights(model.get_weights())
    x = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(low(x), reference(x), atol=1e-6)
    assert not np.allclose(low(x), model(x), atol=1e-3)


def test_every_model_says_whether_it_trains_at_another_resolution():
    """A position embedding's weights are the model's resolution's: no ramp for the ViTs."""
    able = {name for name, entry in MODELS.items() if entry.at_resolution is not None}
    assert able == {"shiftvit"}


@pytest.mark.parametrize(
    "model, recipe, says",
    [
        ("shiftvit", "progressive_resize=4:0.5", "START pixels (8 or more)"),
        ("shiftvit", "progressive_resize=16:0", "START pixels (8 or more)"),
        ("shiftvit", "progressive_resize=16:1.5", "START pixels (8 or more)"),
        ("shiftvit", "progressive_resize=32:0.5", "not below the model's 32"),
        ("shiftvit", "progressive_resize=16:0.5,ema=0.999", "ema=none"),
        ("vit-lsa", "progressive_resize=16:0.5", "position embedding does not"),
    ],
)
def test_a_ramp_that_cannot_train_is_one_line_and_writes_nothing(
    model, recipe, says, tmp_path, capsys
):
    out = tmp_path / "run"
    args = ["train", "--model", model, "--preset", "tiny", "--epochs", "1"]
    assert main([*args, "--recipe", recipe, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_a_run_climbs_the_ramp_and_saves_the_model_at_its_own_resolution(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--model", "shiftvit", "--preset", "tiny", "--data", "shapes"]
    args += ["--epochs", "3", "--recipe", "progressive_resize=16:0.6", "--out", str(out)]
    assert main(args) == 0
    with (out / "history.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(float(row["resolution"])) for row in rows] == [16, 24, 32]
    model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    assert model.input_shape == (None, 32, 32, 3)
    assert "resize_16" not in [layer.name for layer in model.layers]
    assert (out / "metrics.json").is_file()


@pytest.mark.slow
def test_a_timed_run_climbs_the_ramp_within_its_budget_with_its_schedule_ended(tmp_path):
    out = tmp_path / "run"
    # --no-jit: the planner across phases at a budget this short, not XLA's compiles
    args = ["train", "--model", "shiftvit", "--data", "shapes:600", "--time", "60s", "--no-jit"]
    assert main([*args, "--recipe", "progressive_resize=16:0.5", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0.8 * 60.0 <= metrics["wall_seconds"] <= 60.0, metrics
    with (out / "history.csv").open() as f:
        rows = list(csv.DictReader(f))
    resolutions = [int(float(row["resolution"])) for row in rows]
    assert resolutions[0] == 16 and resolutions[-1] == 32, resolutions
    assert resolutions == sorted(resolutions)
    lr_max = get_preset("shiftvit", "tiny").train.lr_max
    assert float(rows[-1]["learning_rate"]) < 0.02 * lr_max  # decayed to its end


class _StopAfterSecondEpoch(Checkpoint):
    """The run's checkpoint, and a kill once the second epoch's is saved."""

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == 1:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_a_resumed_run_goes_on_at_the_resolution_its_step_is_at(tmp_path, monkeypatch):
    out = tmp_path / "run"
    args = ["train", "--model", "shiftvit", "--preset", "tiny", "--data", "shapes:600"]
    args += ["--epochs", "3", "--recipe", "progressive_resize=16:0.6", "--out", str(out)]
    with monkeypatch.context() as patched:
        patched.setattr(train_module, "Checkpoint", _StopAfterSecondEpoch)
        assert main(args) == 130  # interrupted, as a Ctrl-C would
    assert epochs_done(out / "checkpoint") == 2 and not (out / "metrics.json").exists()
    assert main(["train", "--out", str(out), "--resume"]) == 0
    with (out / "history.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(float(row["resolution"])) for row in rows] == [16, 24, 32]
