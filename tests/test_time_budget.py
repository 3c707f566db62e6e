"""`toolkit train --time`: durations, the plan of steps, the planned schedule, and timed runs
that end within their budget with the schedule at its end."""

from __future__ import annotations

import csv
import json
import math
import warnings
from dataclasses import asdict, replace

import keras
import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.common.durations import format_seconds, parse_duration
from toolkit.common.errors import UsageError
from toolkit.models import get_preset
from toolkit.models.presets import PRESETS
from toolkit.training.budget import Budget, plan_steps
from toolkit.training.checkpoint import read_clock, save_state
from toolkit.training.options import TrainOptions, resume_options
from toolkit.training.schedule import PlannedAdamW, PlannedWarmupCosine, WarmupCosine
from toolkit.training.train import _budget, _jit, train

DATA = "shapes:600"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("1h", 3600), ("1h30m", 5400), ("2.5m", 150), (" 1M ", 60)],
)
def test_durations_parse_to_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "0s", "-5m", "abc", "10x", "", "90", "m", "1m1h"])
def test_bad_durations_are_refused(text):
    with pytest.raises(ValueError, match="must be"):
        parse_duration(text)


def test_a_bare_number_is_told_to_add_its_unit():
    with pytest.raises(ValueError, match="add its unit"):
        parse_duration("90")


def test_durations_print_as_a_person_reads_them():
    seconds = (42.25, 845, 900, 3600, 3720)
    assert [format_seconds(s) for s in seconds] == ["42.2s", "14m05s", "15m", "1h", "1h02m"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--time", "0"],
        ["--time=-5m"],
        ["--time", "abc"],
        ["--time", "10x"],
        ["--time", "1m", "--epochs", "3"],
        ["--preset", "cpu15", "--time", "1m", "--epochs", "3"],
    ],
)
def test_bad_time_flags_are_one_line_and_write_nothing(flags, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--model", "shiftvit", "--data", DATA, "--out", str(out), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("toolkit: error: "), err
    assert "--time" in err[0]
    assert not out.exists()


def test_the_plan_counts_each_epoch_end_and_cuts_the_last_epoch_at_a_step():
    # epochs of 10 one-second steps and a 5 s end: 15 s each; 100 s hold 6 of them (90 s),
    # and the 10 s left 5 steps of a 7th, which still ends (5 s)
    assert plan_steps(100, 1.0, 5.0, 10) == 65
    # 4 steps into an epoch: its 6 steps and end (11 s), then 5 whole epochs (75 s), then 14 s
    # left: 9 steps and the end
    assert plan_steps(100, 1.0, 5.0, 10, epoch_step=4) == 6 + 50 + 9
    assert plan_steps(4, 1.0, 5.0, 10) == 0  # not even an epoch's end fits
    with pytest.raises(ValueError):
        plan_steps(10, 0.0, 1.0, 10)


def _lr(schedule, steps) -> np.ndarray:
    return np.array([float(keras.ops.convert_to_numpy(schedule(s))) for s in steps])


def test_the_planned_schedule_is_the_warmup_cosine_of_its_plan():
    steps = [0, 50, 100, 101, 500, 999, 1000, 1200]
    planned = PlannedWarmupCosine(1e-5, 2e-3, 0.1, planned_steps=1000)
    fixed = WarmupCosine(1e-5, 2e-3, warmup_steps=100, total_steps=1000)
    np.testing.assert_allclose(_lr(planned, steps), _lr(fixed, steps), rtol=1e-6, atol=1e-12)
    reference = [  # the formula, by hand
        1e-5 + (2e-3 - 1e-5) * s / 100
        if s < 100
        else (0.5 * 2e-3 * (1 + math.cos(math.pi * (s - 100) / 900)) if s <= 1000 else 0.0)
        for s in steps
    ]
    np.testing.assert_allclose(_lr(planned, steps), reference, rtol=1e-5, atol=1e-10)


def test_the_optimizer_holds_the_plan_and_a_new_plan_moves_the_schedule():
    """The plan is a variable of the optimizer: the schedule reads it (a compiled step sees a
    set between steps) and a checkpoint of the optimizer's variables saves it."""
    schedule = PlannedWarmupCosine(0.0, 1e-3, 0.0, planned_steps=100)
    optimizer = PlannedAdamW(learning_rate=schedule)
    weight = keras.Variable(np.ones(3, "float32"))
    optimizer.build([weight])
    assert any(v is optimizer.plan for v in optimizer.variables)
    half = float(keras.ops.convert_to_numpy(schedule(50)))
    optimizer.plan.assign(200.0)
    later = float(keras.ops.convert_to_numpy(schedule(50)))
    assert half == pytest.approx(0.5e-3, rel=1e-5)
    assert later == pytest.approx(0.5e-3 * (1 + math.cos(math.pi / 4)), rel=1e-5)
    assert schedule.get_config()["planned_steps"] == 200.0  # the plan, as saved


def _tiny_model() -> keras.Model:
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=PlannedAdamW(PlannedWarmupCosine(0.0, 1e-3, 0.1, 10)), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def test_a_resumed_timed_run_has_what_is_left_or_a_new_budget(tmp_path):
    preset = get_preset("shiftvit", "cpu15")
    options = TrainOptions("shiftvit", "cpu15", DATA)
    (tmp_path / "checkpoint").mkdir()
    save_state(
        tmp_path / "checkpoint" / "state.npz",
        _tiny_model(),
        3,
        {"seconds_spent": 600.0, "budget_seconds": 900.0},
    )
    assert read_clock(tmp_path / "checkpoint") == {"seconds_spent": 600.0, "budget_seconds": 900.0}
    left = _budget(preset, options, tmp_path, resume=True, new_budget=False, started=0.0)
    assert (left.seconds, left.spent_before) == (300.0, 600.0)
    two_minutes = replace(preset, train=replace(preset.train, time_budget=120.0))  # --time 2m
    new = _budget(two_minutes, options, tmp_path, True, True, 0.0)
    assert (new.seconds, new.spent_before) == (120.0, 600.0)
    save_state(
        tmp_path / "checkpoint" / "state.npz",
        _tiny_model(),
        9,
        {"seconds_spent": 905.0, "budget_seconds": 900.0},
    )
    with pytest.raises(UsageError, match=r"spent its budget of 15m.*--resume --time"):
        _budget(preset, options, tmp_path, resume=True, new_budget=False, started=0.0)
    fresh = _budget(preset, options, tmp_path / "new", resume=False, new_budget=False, started=0)
    assert (fresh.seconds, fresh.spent_before) == (900.0, 0.0)


def test_a_timed_run_compiles_its_step_with_xla_unless_told_not_to(tmp_path):
    """--jit's default: on for a timed run (the fastest step measured on the CPU), off for a
    fixed-epoch one; --no-jit and --jit say otherwise."""
    timed, fixed = Budget(900.0, 0.0, 0.0), None
    assert (_jit(TrainOptions("shiftvit"), timed), _jit(TrainOptions("shiftvit"), fixed)) == (
        True,
        False,
    )
    assert not _jit(TrainOptions("shiftvit", jit=False), timed)
    assert _jit(TrainOptions("shiftvit", jit=True), fixed)


def test_every_timed_preset_names_its_budget_and_an_epoch_count_for_a_fixed_run():
    timed = {(m, p) for m, ps in PRESETS.items() for p in ps if ps[p][1].time_budget}
    assert {("shiftvit", "cpu60"), ("vit-lsa", "cpu15"), ("vit", "cpu60")} <= timed
    for model, name in timed:
        recipe = get_preset(model, name).train
        assert recipe.epochs >= 1 and recipe.time_budget in (900.0, 3600.0)
        minutes = int(recipe.time_budget // 60)
        assert name == f"cpu{minutes}", "a timed preset's name says its minutes"


@pytest.mark.slow
def test_a_timed_run_ends_within_its_budget_with_its_schedule_ended(tmp_path, capsys):
    out = tmp_path / "run"
    # --no-jit: the planner's arithmetic at a budget this short, not XLA's 10-20 s compile
    argv = ["train", "--model", "shiftvit", "--data", DATA, "--time", "45s", "--no-jit"]
    code = main([*argv, "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert json.loads((out / "config.json").read_text())["options"]["jit"] is False
    assert metrics["time_budget_seconds"] == 45.0
    assert metrics["wall_seconds"] <= 45.0, metrics
    assert metrics["wall_seconds"] >= 0.8 * 45.0, "the plan used the budget"
    with (out / "history.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == metrics["epochs_run"] >= 3
    rates = [float(row["learning_rate"]) for row in rows]
    lr_max = get_preset("shiftvit", "tiny").train.lr_max
    assert max(rates) > 0.5 * lr_max and rates[-1] < 0.02 * lr_max, rates  # decayed to its end
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["time"] == 45.0 and config["preset"]["train"]["time_budget"] == 45.0
    assert config["length"]["images_seen"] == metrics["images_seen"] > 0
    assert metrics["images_seen"] % get_preset("shiftvit", "tiny").train.batch_size == 0
    assert f"{metrics['epochs_run']} epochs" in printed and "of a 45.0s budget" in printed
    with warnings.catch_warnings():  # loads with its optimizer (the plan one of its variables)
        warnings.simplefilter("error")
        model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    assert model.count_params() == metrics["parameters"]


@pytest.mark.slow
def test_a_budget_too_short_for_one_step_says_how_long_setup_took(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--model", "shiftvit", "--data", DATA, "--time", "2s", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert (
        "--time 2.0s is too short" in err[0]
        and "start-up and data " in err[0]
        and "pass --time" in err[0]
    )
    assert not out.exists()


@pytest.mark.slow
def test_epochs_make_a_fixed_run_of_a_timed_preset(tmp_path):
    out = train(
        TrainOptions("shiftvit", "cpu15", DATA, epochs=1, arch="depths=1:1:1:1"),
        out=tmp_path / "run",
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_run"] == 1 and metrics["time_budget_seconds"] is None
    config = json.loads((out / "config.json").read_text())
    assert config["preset"]["train"]["time_budget"] is None


def test_a_run_from_before_time_budgets_resumes_for_its_epochs(tmp_path):
    """A cpu60 run started when the preset trained 75 epochs goes on training epochs (its
    checkpoint holds AdamW's variables, not a timed run's)."""
    options = asdict(TrainOptions("shiftvit", "cpu60", DATA))
    del options["time"]
    config = {"options": options, "preset": get_preset("shiftvit", "cpu60").to_dict()}
    (tmp_path / "config.json").write_text(json.dumps(config))
    resumed = resume_options(tmp_path, {})
    assert resumed.epochs == 75 and resumed.time is None


def test_a_resume_that_adds_a_recipe_says_the_run_had_none(tmp_path):
    config = {"options": asdict(TrainOptions("shiftvit", "tiny", DATA, epochs=2))}
    config["preset"] = get_preset("shiftvit", "tiny").to_dict()
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match=r"keeps the run's --recipe \(it had none\).*drop"):
        resume_options(tmp_path, {"recipe": "mixup=0.5"})
