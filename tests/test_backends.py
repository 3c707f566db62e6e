"""Training on JAX (and PyTorch, when installed) where TensorFlow cannot be imported, and the
round trip of those runs to TensorFlow: safe-mode load, equal logits, export, verify.

The JAX side runs in subprocesses (tests/without_tensorflow.py blocks `import tensorflow`);
this process is the TensorFlow side. One subprocess trains both tiny presets through the CLI
and runs eval/predict/presets on them; the runs are then checked here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.common.backend import installed

pytestmark = pytest.mark.slow  # every test here trains or runs a backend's suite

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
MODELS = ("shiftvit", "vit-lsa")
DATA = "shapes:600"
EPOCHS = "12"  # ~1 s each after the first: both learn the shapes (int8 parity of an untrained
# model is a coin toss); the compile of the step is most of the time
OTHER_BACKENDS = [b for b in ("jax", "torch") if installed(b)]
needs_jax = pytest.mark.skipif(
    not installed("jax"), reason="jax not installed: pip install -e '.[dev]'"
)


def _probe_images() -> np.ndarray:
    return np.random.default_rng(0).uniform(0, 255, (8, 32, 32, 3)).astype(np.float32)


def run_without_tensorflow(
    code: str, backend: str, env: dict[str, str] | None = None, timeout: int = 900
) -> subprocess.CompletedProcess:
    """`code` in a fresh Python on `backend`, `import tensorflow` failing, from the repo root."""
    environment = {
        **os.environ,
        "KERAS_BACKEND": backend,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, str(TESTS / "without_tensorflow.py"), "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=timeout,
    )


# --- the op and augmentation reference tests on every other installed backend ----------------


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_op_reference_tests_pass_on_other_backends(backend):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "tests/test_ops.py",
            "tests/test_augment.py",
            "tests/test_paper_pieces.py",
            "tests/test_recipe.py",
            "tests/test_device_data.py",  # the device-resident path, its learning run too
            # of the recipe's tiny trainings, the one whose EMA check is backend-specific: the
            # others' pieces train on JAX in tests/test_paper_cifar.py (the paper's recipe)
            "-k",
            # and the device path's resume test: config.json handling, the same on any backend;
            # and the policy's share of images per op over 4000 draws (19 s of JAX compiles):
            # its fixed-draws test checks the same draw-against-probability rule here
            "(not test_tiny_training_with or label_smoothing_and_ema) and not resume_keeps"
            " and not applies_each_op_with_its_probability",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "TOOLKIT_TEST_BACKEND": backend,
            "JAX_PLATFORMS": "cpu",
            # JAX compiles every eager op: at XLA's lowest level that takes 40% less time (the
            # optimised code is what the training tests below run and compare with TF)
            "XLA_FLAGS": "--xla_backend_optimization_level=0",
        },
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout


# --- JAX without TensorFlow -------------------------------------------------------------------


@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory) -> dict:
    """Tiny ShiftViT and ViT-LSA trained on JAX with TF blocked, via the CLI; then eval,
    predict and (refused) export in the same process. Exit codes, logits of fixed images, and
    whether TensorFlow got imported. (`toolkit presets` on JAX is left out: it builds every
    preset, 45 s, and nothing in it is backend-specific beyond what training builds.)"""
    root = tmp_path_factory.mktemp("jax_runs")
    from PIL import Image

    Image.fromarray(_probe_images()[0].astype(np.uint8)).save(root / "probe.png")
    code = f"""
        import json, sys
        from pathlib import Path
        import numpy as np
        from toolkit.cli.main import main
        from toolkit.runmodel import load_keras_model
        root = Path({str(root)!r})
        x = np.random.default_rng(0).uniform(0, 255, (8, 32, 32, 3)).astype(np.float32)
        codes = {{}}
        for model in {MODELS!r}:
            out = root / model
            codes["train " + model] = main(["train", "--model", model, "--preset", "tiny",
                "--data", {DATA!r}, "--epochs", {EPOCHS!r}, "--out", str(out)])
            logits = load_keras_model(out / "model.keras").predict(x, verbose=0)
            np.save(out / "jax_logits.npy", np.asarray(logits))
            codes["eval " + model] = main(["eval", str(out)])
        codes["predict"] = main(["predict", str(root / "shiftvit" / "model.keras"),
                                 str(root / "probe.png"), "--top-k", "2"])
        codes["export"] = main(["export", str(root / "shiftvit"), "--format", "tflite"])
        codes["tensorflow imported"] = "tensorflow" in sys.modules
        (root / "codes.json").write_text(json.dumps(codes))
    """
    proc = run_without_tensorflow(code, "jax")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {
        "root": root,
        "codes": json.loads((root / "codes.json").read_text()),
        "stdout": proc.stdout,
        "stderr": proc.stderr,
    }


@needs_jax
def test_jax_trains_evaluates_and_predicts_without_tensorflow(jax_runs):
    codes = jax_runs["codes"]
    assert codes["tensorflow imported"] is False
    for step in ("train shiftvit", "eval shiftvit", "train vit-lsa", "eval vit-lsa"):
        assert codes[step] == 0, step
    assert codes["predict"] == 0
    assert "probe.png: " in jax_runs["stdout"]  # predict printed its top-2
    assert codes["export"] == 2  # export needs TensorFlow, and says so in one line
    assert "toolkit: error: toolkit export needs TensorFlow" in jax_runs["stderr"]


@needs_jax
@pytest.mark.parametrize("model", MODELS)
def test_jax_run_records_its_backend_and_learned(jax_runs, model):
    run = jax_runs["root"] / model
    config = json.loads((run / "config.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    for record in (config["backend"], metrics["backend"]):
        assert record["name"] == "jax" and record["version"][0].isdigit()
    assert metrics["test_top1"] > 0.3  # it learned (chance: 0.1), not just ran


@needs_jax
@pytest.mark.parametrize("model", MODELS)
def test_jax_run_loads_on_tensorflow_with_the_same_logits_and_score(jax_runs, model, capsys):
    run = jax_runs["root"] / model
    from toolkit.keras_setup import setup_keras

    setup_keras()  # registers the custom layers for safe_mode loading

    loaded = keras.saving.load_model(run / "model.keras", safe_mode=True, compile=False)
    logits = np.asarray(loaded.predict(_probe_images(), verbose=0))
    want = np.load(run / "jax_logits.npy")
    assert np.abs(logits - want).max() <= 1e-5
    metrics = json.loads((run / "metrics.json").read_text())
    assert main(["eval", str(run)]) == 0  # on TensorFlow: the top-1 JAX measured
    assert f"top-1 {metrics['test_top1']:.2%}" in capsys.readouterr().out


@needs_jax
@pytest.mark.parametrize(
    ("model", "formats"),
    [("shiftvit", "all"), ("vit-lsa", "onnx,tflite")],
    ids=["shiftvit-all-formats", "vit-lsa-float-formats"],
)
def test_jax_run_exports_and_verifies_on_tensorflow(jax_runs, model, formats, capsys):
    """ShiftViT: every format; ViT-LSA: the float ones (its int8 path is the same code).
    verify at model level: the op level does not depend on the run."""
    run = jax_runs["root"] / model
    calibration = ["--calib-samples", "64"] if formats == "all" else []
    assert main(["export", str(run), "--format", formats, *calibration]) == 0
    assert main(["verify", str(run), "--models-only"]) == 0
    report = json.loads((run / "verify.json").read_text())
    assert report["passed"]
    assert "verify: PASSED" in capsys.readouterr().out


# --- JAX data parallelism and mixed precision --------------------------------------------------


@needs_jax
def test_jax_mirrored_strategy_trains_on_two_cpu_devices_in_bfloat16(tmp_path):
    code = f"""
        import json
        import keras, numpy as np
        from toolkit.data.array_pipeline import replicas
        from toolkit.training.strategies import make_placement
        from toolkit.training.options import TrainOptions
        from toolkit.training.train import train
        placement = make_placement("mirrored")
        with placement.scope():
            print("replicas", placement.replicas, replicas())
        out = train(TrainOptions("vit-lsa", "tiny", "shapes:99", epochs=1, batch_size=16,
                                 strategy="mirrored", precision="mixed_bfloat16"),
                    out={str(tmp_path / "run")!r})
        model = keras.saving.load_model(out / "model.keras", safe_mode=True)
        print("policy", keras.mixed_precision.global_policy().name)
        logits = np.asarray(model.predict(np.zeros((3, 32, 32, 3), "float32"), verbose=0))
        print("logits", logits.dtype, bool(np.isfinite(logits).all()))
    """
    # two CPU devices; a correctness check (nothing compared with TF's numbers): XLA's lowest
    # level compiles the sharded bfloat16 step in less time
    flags = "--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=0"
    proc = run_without_tensorflow(code, "jax", env={"XLA_FLAGS": flags})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "replicas 2 2" in proc.stdout  # 79 train / 10 val / 10 test split unevenly on 2
    assert "policy float32" in proc.stdout  # restored after training
    assert "logits float32 True" in proc.stdout
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["options"]["strategy"] == "mirrored"
    assert config["options"]["precision"] == "mixed_bfloat16"
