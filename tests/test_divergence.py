"""A diverged training stops in one line with nothing that looks finished; a checkpoint that
cannot be read (empty, truncated) is one line naming the way out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.common.errors import RunError, UsageError
from toolkit.training.checkpoint import epochs_done
from toolkit.training.divergence import StopOnDivergence


@pytest.mark.parametrize("logs", [{"loss": float("nan")}, {"loss": 1.0, "val_loss": np.inf}])
def test_a_loss_that_is_not_a_number_stops_the_run(logs):
    with pytest.raises(RunError, match=r"diverged in epoch 3 .*--recipe lr_max=0\.0001"):
        StopOnDivergence(lr_max=1e-3).on_epoch_end(2, logs)


def test_finite_losses_pass():
    StopOnDivergence(lr_max=1e-3).on_epoch_end(0, {"loss": 2.3, "val_loss": 2.2})


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated"])
def test_an_empty_or_truncated_checkpoint_is_one_line(tmp_path, content):
    (tmp_path / "state.npz").write_bytes(content)
    with pytest.raises(UsageError, match=r"cannot be read .*delete .* to train the run again"):
        epochs_done(tmp_path)


@pytest.mark.slow
def test_a_diverged_training_exits_1_in_one_line_keeping_no_score(tmp_path, capsys):
    out = tmp_path / "run"
    recipe = "lr_max=1e10,warmup_fraction=0"
    code = main(
        [
            "train",
            "--model",
            "vit",
            "--data",
            "shapes:200",
            "--epochs",
            "2",
            "--recipe",
            recipe,
            "--out",
            str(out),
        ]  # fmt: skip
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "training diverged in epoch 1" in err[0], err
    assert not (out / "metrics.json").exists() and not (out / "model.keras").exists()
    assert not (out / "history.csv").exists()  # the diverged epoch is not logged
    assert json.loads((out / "config.json").read_text())["options"]["recipe"] == recipe
