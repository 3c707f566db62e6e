"""`toolkit train --strategy multi-process`: two JAX processes on loopback train one run, written
once by process 0, with equal weights in both; resume; the one-line refusals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from toolkit.cli.main import main
from toolkit.common.backend import installed
from toolkit.common.errors import RunError, UsageError
from toolkit.data.array_pipeline import ArrayBatches
from toolkit.training.cluster import Cluster, Peers, cluster_for, cluster_from, rendezvous

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = {
    "config.json",
    "labels.txt",
    "history.csv",
    "history.png",
    "metrics.json",
    "model.keras",
}
needs_jax = pytest.mark.skipif(not installed("jax"), reason="jax not installed")
# the quick tests whose processes meet, time out and are timed in seconds: `make test` runs them
# with no other test beside. The two-process trainings (slow) share the cores with the other
# worker: their bounds are minutes, and alone they kept the 2 cores 150% busy (they wait on
# each other)
timed = pytest.mark.serial


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(pid: int, port: int, out: Path, *extra: str, timeout: int = 60) -> subprocess.Popen:
    """`toolkit train` as process `pid` of 2 (JAX, 2 CPU devices each) on loopback."""
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "PYTHONPATH": str(ROOT),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    argv = [
        sys.executable, "-m", "toolkit.cli.main", "train", "--out", str(out),
        "--strategy", "multi-process", "--coordinator", f"127.0.0.1:{port}",
        "--num-processes", "2", "--process-id", str(pid), "--connect-timeout", str(timeout),
        *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(procs: list[subprocess.Popen], limit: int = 900) -> list[tuple[int, str, str]]:
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=limit)
        results.append((proc.returncode, out, err))
    return results


def _digest(stdout: str, pid: int) -> str:
    lines = [ln for ln in stdout.splitlines() if f"process {pid} of 2: weights sha256" in ln]
    assert len(lines) == 1, stdout[-2000:]
    return lines[0].split()[-1]


def _visible_files(out: Path) -> set[str]:
    return {p.name for p in out.iterdir()}


# --- two real processes ------------------------------------------------------------------------


def _npz(tmp_path: Path) -> str:
    """260 images of 3 classes: split 206 / 27 / 27, and 27 = 16 + 11 does not split in 4."""
    x, y = _images()
    np.savez(tmp_path / "data.npz", x=x, y=y)
    return f"npz:{tmp_path / 'data.npz'}"


def _images() -> tuple[np.ndarray, np.ndarray]:
    """260 seeded 32x32 noise images of 3 classes (87, 87, 86), in the order of their class
    folders (`_streamed_folder`): the same split and normalize statistics (constants of the
    compiled programs) from an npz of them as from their folder."""
    x = np.random.default_rng(0).integers(0, 256, (260, 32, 32, 3), dtype=np.uint8)
    return x, np.repeat([0, 1, 2], [87, 87, 86])


# the two-process trainings below share their compiled programs through JAX's compilation cache
# (conftest.py): the same model, image size, classes, batch, normalize statistics and schedule
# (its steps are those of the epochs of the same 206 training images), so only the first one
# compiles its steps (~12 CPU-s of the two processes' ~50)
TRAIN = ("--model", "vit", "--preset", "tiny", "--epochs", "2", "--batch-size", "16")


@pytest.mark.slow
@needs_jax
def test_two_processes_train_one_run_with_equal_weights_then_it_evaluates_and_exports(
    tmp_path, capsys
):
    out = tmp_path / "run"
    port = _free_port()
    common = (*TRAIN, "--data", _npz(tmp_path))
    started = time.monotonic()
    results = _finish([_start(pid, port, out, *common) for pid in (0, 1)])
    print(f"two processes, two epochs: {time.monotonic() - started:.0f} s", file=sys.stderr)
    for rc, stdout, stderr in results:
        assert rc == 0, stdout[-2000:] + stderr[-3000:]
    digests = [_digest(results[pid][1], pid) for pid in (0, 1)]
    assert digests[0] == digests[1]
    assert " - val_accuracy: " in results[0][1]  # process 0 logs the epoch, not process 1
    assert " - val_accuracy: " not in results[1][1]
    # written once, by process 0: the run's files, no checkpoint, lock or temp file left
    assert _visible_files(out) == RUN_FILES
    config = json.loads((out / "config.json").read_text())
    assert config["distribution"] == {
        "strategy": "multi-process",
        "processes": 2,
        "devices": 4,
        "coordinator": f"127.0.0.1:{port}",
    }
    assert len((out / "history.csv").read_text().strip().splitlines()) == 3  # header + 2 epochs
    metrics = json.loads((out / "metrics.json").read_text())
    # 27 = 16 + 11 test images: the last batch, padded to split in 4, is not counted so
    assert metrics["test_samples"] == 27
    assert round(metrics["test_top1"] * 27) == pytest.approx(metrics["test_top1"] * 27, abs=1e-4)

    from toolkit.runmodel import load_run_model
    from toolkit.training.train import weights_sha256

    assert weights_sha256(load_run_model(out)) == digests[0]  # what process 1 holds too
    capsys.readouterr()
    assert main(["eval", str(out)]) == 0
    assert f"top-1 {metrics['test_top1']:.2%}" in capsys.readouterr().out  # same test split
    assert main(["export", str(out), "--format", "onnx"]) == 0
    assert (out / "export" / "model.json").is_file()


@pytest.mark.slow
@needs_jax
@pytest.mark.parametrize("killed", [1, 0])  # 0 hosts JAX's coordination service
def test_a_killed_process_stops_the_other_in_one_line_and_the_run_resumes(killed, tmp_path):
    out = tmp_path / "run"
    port = _free_port()
    procs = [_start(pid, port, out, *TRAIN, "--data", _npz(tmp_path)) for pid in (0, 1)]
    seen = ""
    for line in procs[0].stdout:  # "Epoch 2/2" follows epoch 1's checkpoint
        seen += line
        if line.startswith("Epoch 2/2"):
            break
    assert "Epoch 2/2" in seen, seen[-2000:] + procs[0].stderr.read()[-2000:]
    procs[killed].send_signal(signal.SIGKILL)  # as the OOM killer or a lost host would
    procs[killed].communicate(timeout=60)
    at = time.monotonic()
    other = procs[1 - killed]
    _, stderr = other.communicate(timeout=120)
    assert time.monotonic() - at < 15  # at once, not after JAX's collective times out
    assert other.returncode == 1, stderr[-3000:]  # not JAX's abort (134)
    assert "Traceback" not in stderr and "Terminating process" not in stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("toolkit: error:")]
    assert errors == [stderr.strip().splitlines()[-1]], stderr[-3000:]
    assert errors[0].startswith(f"toolkit: error: process {killed} of 2 was ")
    assert f"`toolkit train --out {out} --resume` in every process" in errors[0]
    assert (out / "checkpoint").is_dir() and not (out / "metrics.json").exists()
    if killed == 1:
        return  # the checkpoint is process 0's either way: the resume is checked once, below

    port = _free_port()
    results = _finish([_start(pid, port, out, "--resume") for pid in (0, 1)])
    for rc, stdout, stderr in results:
        assert rc == 0, stdout[-2000:] + stderr[-3000:]
    assert "Epoch 2/2" in results[0][1] and "Epoch 1/2" not in results[0][1]  # restored
    assert _digest(results[0][1], 0) == _digest(results[1][1], 1)
    assert len((out / "history.csv").read_text().strip().splitlines()) == 3  # header + 2
    assert RUN_FILES <= _visible_files(out) and "checkpoint" not in _visible_files(out)


def _streamed_folder(tmp_path: Path) -> str:
    """`_images` as PNGs in 3 class folders, streamed: as `_npz`'s, 206 / 27 / 27."""
    from PIL import Image

    for i, (image, label) in enumerate(zip(*_images(), strict=True)):
        folder = tmp_path / "images" / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{i:03d}.png")  # listed in this order
    return f"folder:{tmp_path / 'images'},stream"


@pytest.mark.slow
@needs_jax
def test_two_processes_train_on_a_streamed_folder_whose_splits_do_not_divide_the_batch(tmp_path):
    # the in-memory images' case is the one above (equal weights)
    out = tmp_path / "run"
    port = _free_port()
    argv = (*TRAIN, "--data", _streamed_folder(tmp_path))
    results = _finish([_start(pid, port, out, *argv) for pid in (0, 1)])
    for rc, stdout, stderr in results:
        assert rc == 0, stdout[-2000:] + stderr[-3000:]
    assert _digest(results[0][1], 0) == _digest(results[1][1], 1)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test_samples"] == 27  # the padding copies are not counted
    assert round(metrics["test_top1"] * 27, 4) == round(metrics["test_top1"] * 27)
    assert _visible_files(out) == RUN_FILES


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "environ", "expected"),
    [
        ((None, 2, 0), {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "a:1,b:2,c:3"}, "lists 3 addresses"),
        (("h:1", 2, 2), {}, "--process-id 2 is out of range for 2 processes: pass 0 to 1"),
        (("h:1", None, None), {"KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
                               "KERAS_DISTRIBUTION_PROCESS_ID": "5"},
         "KERAS_DISTRIBUTION_PROCESS_ID 5 is out of range"),
        ((None, 2, 0), {}, "pass --coordinator HOST:PORT"),
        (("h:1", None, 0), {}, "pass --num-processes N"),
        (("h:1", 2, None), {}, "pass --process-id I"),
        (("nohost", 2, 0), {}, "is not HOST:PORT"),
        (("h:1", 0, 0), {}, "--num-processes must be 1 or more"),
    ],
)  # fmt: skip
def test_bad_cluster_settings_are_one_line_refusals(flags, environ, expected):
    with pytest.raises(UsageError, match=None) as info:
        cluster_from(*flags, environ=environ)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_cluster_settings_default_to_keras_variables():
    environ = {
        "KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234,10.0.0.2:2345",
        "KERAS_DISTRIBUTION_PROCESS_ID": "1",
    }
    cluster = cluster_from(environ=environ)
    assert cluster == Cluster("10.0.0.1:1234", 2, 1)
    assert cluster_from("h:9", 3, 0, 5, environ=environ) == Cluster("h:9", 3, 0, 5)  # flags win


@timed
def test_a_process_that_cannot_reach_the_coordinator_gives_up_in_time():
    cluster = Cluster(f"127.0.0.1:{_free_port()}", 2, 1, timeout=2)
    started = time.monotonic()
    with pytest.raises(UsageError, match="process 1 of 2 could not reach the coordinator"):
        rendezvous(cluster, "settings")
    assert 1.5 < time.monotonic() - started < 10


@timed
def test_process_0_gives_up_when_the_others_do_not_come():
    cluster = Cluster(f"127.0.0.1:{_free_port()}", 3, 0, timeout=2)
    with pytest.raises(UsageError, match=r"waited 2 s .* for process\(es\) 1, 2 of 3"):
        rendezvous(cluster, "settings")


def _meet(clusters: list[Cluster], settings: list[str]) -> list[str]:
    """Rendezvous every cluster in its own thread; each one's error ('' when it met)."""
    errors = [""] * len(clusters)

    def run(i: int) -> None:
        try:
            rendezvous(clusters[i], settings[i]).close()
        except UsageError as exc:
            errors[i] = str(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clusters))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


@timed
def test_processes_meet_and_are_refused_together_on_different_commands():
    address = f"127.0.0.1:{_free_port()}"
    ok = _meet([Cluster(address, 2, 0, 20), Cluster(address, 2, 1, 20)], ["a", "a"])
    assert ok == ["", ""]
    address = f"127.0.0.1:{_free_port()}"
    errors = _meet([Cluster(address, 2, 0, 20), Cluster(address, 2, 1, 20)], ["a", "b"])
    assert all("other training settings than process 0" in e for e in errors), errors
    address = f"127.0.0.1:{_free_port()}"
    errors = _meet([Cluster(address, 2, 0, 20), Cluster(address, 3, 1, 20)], ["a", "a"])
    assert all("same --num-processes" in e for e in errors), errors


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--num-processes", "3", "--process-id", "0"],
         "--num-processes, --process-id: only for --strategy multi-process"),
        (["--strategy", "multi-process", "--coordinator", "127.0.0.1:1", "--num-processes",
          "2", "--process-id", "2"], "--process-id 2 is out of range"),
        (["--strategy", "multi-process", "--coordinator", "127.0.0.1:1,127.0.0.1:2,x:3",
          "--num-processes", "2", "--process-id", "0"], "lists 3 addresses but --num-processes"),
    ],
)  # fmt: skip
def test_train_refuses_bad_cluster_flags_before_anything_is_written(
    argv, expected, tmp_path, capsys
):
    base = ["train", "--model", "vit", "--data", "shapes:100", "--out", str(tmp_path / "run")]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": "1"},
         "KERAS_DISTRIBUTION_NUM_PROCESSES=2"),
        ({"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234,10.0.0.2:1234"},
         "KERAS_DISTRIBUTION_JOB_ADDRESSES=10.0.0.1:1234,10.0.0.2:1234"),
    ],
)  # fmt: skip
def test_keras_cluster_variables_without_multi_process_are_refused_in_one_line(
    environ, named, tmp_path, capsys, monkeypatch
):
    # else every process would train its own copy of the run, the second refused mid-way
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    argv = ["train", "--model", "vit", "--data", "shapes:100", "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"toolkit: error: {named} makes this process one of several")
    assert "pass --strategy multi-process" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "1")  # one process: trains alone
    monkeypatch.delenv("KERAS_DISTRIBUTION_JOB_ADDRESSES", raising=False)
    assert cluster_for("default") is None


@pytest.mark.skipif(
    os.environ["KERAS_BACKEND"] != "tensorflow", reason="the TensorFlow backend's refusal"
)
def test_multi_process_on_tensorflow_is_refused_naming_the_jax_way(tmp_path, capsys):
    argv = ["train", "--model", "vit", "--data", "shapes:100", "--out", str(tmp_path / "run"),
            "--strategy", "multi-process", "--coordinator", "127.0.0.1:1",
            "--num-processes", "2", "--process-id", "0"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--strategy multi-process is not available on the tensorflow backend" in err
    assert "KERAS_BACKEND=jax" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []


@timed
@needs_jax
def test_train_process_with_unreachable_coordinator_exits_2_in_one_line_writing_nothing(
    tmp_path,
):
    started = time.monotonic()
    proc = _start(1, _free_port(), tmp_path / "run", "--model", "vit", timeout=3)
    _, stderr = proc.communicate(timeout=300)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, stderr[-3000:]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("toolkit: error:")]
    assert len(lines) == 1 and "could not reach the coordinator 127.0.0.1:" in lines[0]
    assert "within 3 s" in lines[0]
    assert elapsed < 120  # the time-out, not a hang (a fresh Python with JAX takes its time)
    assert list(tmp_path.iterdir()) == []


@timed
def test_a_process_stopping_with_its_own_error_tells_the_others_its_line_at_once():
    # process 0 on a full disk: its peers get its one line to pass on, without a wait for
    # a lost process (what an unexpected error, e.g. a failed collective, waits for)
    mine, theirs = socket.socketpair()
    line = "no space left on device writing RUN/checkpoint/state.npz: free space and resume"
    started = time.monotonic()
    with pytest.raises(RunError), Peers(Cluster("127.0.0.1:1", 2, 0), {1: mine}, "hint"):
        raise RunError(line)
    assert time.monotonic() - started < 2
    assert json.loads(theirs.makefile().readline()) == {"stopped": line}
    theirs.close()


# --- the supervisor: a training child that dies -------------------------------------------------

JAX_ABORT = """
import os, sys, time
print("Epoch 2/3", flush=True)
sys.stderr.write("I0000 an old log line\\n"); sys.stderr.flush()
time.sleep(1.5)  # older than the supervisor's hold: passed on
sys.stderr.write("F1127 client.h:80] Terminating process because the JAX distributed service\\n")
sys.stderr.write("Traceback (most recent call last):\\n  ValueError: Gloo AllGather failed\\n")
sys.stderr.write(sys.argv[1]); sys.stderr.flush()
os.abort()
"""


@timed
@pytest.mark.parametrize(
    ("own_line", "expected"),
    [
        ("", "toolkit: error: process 0 of 2 was lost (JAX's runtime aborted process 1 of 2: "
             "SIGABRT); resume the run from its last complete epoch with "
             "`toolkit train --out RUN --resume` in every process"),
        ("toolkit: error: process 0 of 2 was lost (its connection closed); ...\n",
         "toolkit: error: process 0 of 2 was lost (its connection closed); ..."),
    ],
)  # fmt: skip
def test_a_training_child_that_jax_aborts_is_one_line_and_exit_1(own_line, expected, capfd):
    from toolkit.training.supervise import supervise

    command = [sys.executable, "-c", JAX_ABORT, own_line]
    assert supervise([], Cluster("127.0.0.1:1", 2, 1), Path("RUN"), command) == 1
    captured = capfd.readouterr()
    assert captured.out == "Epoch 2/3\n"  # stdout passes straight through
    assert captured.err.splitlines() == ["I0000 an old log line", expected]


@timed
@pytest.mark.parametrize(
    ("end", "expected"),
    [
        ("os.abort()", "toolkit: error: process 0 of 2 was lost (JAX's runtime aborted process 1"),
        ("print('toolkit: error: process 0 of 2 was lost', file=sys.stderr); sys.exit(1)",
         "toolkit: error: process 0 of 2 was lost"),
    ],
)  # fmt: skip
def test_a_child_slow_to_die_after_jaxs_fatal_line_is_still_one_line(end, expected, capfd):
    # on a loaded CPU the abort (or the child's own line and exit) may come after the hold
    from toolkit.training.supervise import supervise

    script = (
        "import os, sys, time; print('F1127 client.h:80] Terminating process', file=sys.stderr); "
        f"print('Traceback (most recent call last):', file=sys.stderr); time.sleep(1.5); {end}"
    )
    command = [sys.executable, "-c", script]
    assert supervise([], Cluster("127.0.0.1:1", 2, 1), Path("RUN"), command) == 1
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(expected), err


@timed
def test_a_training_child_aborted_after_its_own_line_adds_nothing(capfd):
    # process 0 stopped by a full disk says so; JAX aborts it on its way out, seconds later
    from toolkit.training.supervise import supervise

    script = (
        "import os, sys, time; print('toolkit: error: no space left ...', file=sys.stderr); "
        "sys.stderr.flush(); time.sleep(1.5); print('F1127 Terminating', file=sys.stderr); "
        "sys.stderr.flush(); os.abort()"
    )
    command = [sys.executable, "-c", script]
    assert supervise([], Cluster("127.0.0.1:1", 2, 0), Path("RUN"), command) == 1
    assert capfd.readouterr().err == "toolkit: error: no space left ...\n"


@timed
def test_a_training_childs_own_exit_codes_and_lines_pass_through(capfd):
    from toolkit.training.supervise import supervise

    script = "import sys; print('noise', file=sys.stderr); sys.exit(%d)"
    for code in (0, 2):
        command = [sys.executable, "-c", script % code]
        assert supervise([], Cluster("127.0.0.1:1", 2, 0), None, command) == code
        assert capfd.readouterr().err == "noise\n"


# --- each process's part of every batch --------------------------------------------------------


@pytest.mark.parametrize("seed", [None, 3])
def test_the_parts_of_every_batch_put_together_are_the_one_process_batch(seed):
    x = np.arange(30, dtype=np.uint8).reshape(30, 1)
    y = np.arange(30)
    whole = ArrayBatches(x, y, 8, shuffle_seed=seed, multiple=4)
    parts = [ArrayBatches(x, y, 8, shuffle_seed=seed, multiple=4, part=(p, 2)) for p in (0, 1)]
    assert len(parts[0]) == len(parts[1]) == len(whole)
    for index in range(len(whole)):
        got = [part[index] for part in parts]
        assert len(got[0]) == len(got[1]) == len(whole[index])  # the same structure everywhere
        for k, item in enumerate(whole[index]):
            assert np.array_equal(np.concatenate([got[0][k], got[1][k]]), item)
            assert len(got[0][k]) == len(item) // 2


@pytest.mark.parametrize(("part", "real"), [((0, 1), 509), ((0, 2), 256), ((1, 2), 253)])
def test_every_batch_of_a_padded_split_has_the_same_structure(part, real):
    # 509 validation images (the shared CIFAR-10 sample's) in batches of 64 on 4 devices: the
    # last batch is padded, and Keras lays every batch out as the first one
    x, y = np.zeros((509, 2, 2, 3), np.uint8), np.arange(509) % 10
    batches = ArrayBatches(x, y, 64, multiple=4, part=part)
    structures = {len(batches[i]) for i in range(len(batches))}
    assert structures == {3}, structures
    weights = np.concatenate([batches[i][2] for i in range(len(batches))])
    assert weights.sum() == real  # the 3 copies padding the last batch weigh 0
    assert {len(b) for b in ArrayBatches(x[:508], y[:508], 64, multiple=4)} == {2}  # no pad


@pytest.mark.slow
@needs_jax
def test_a_batch_the_devices_cannot_share_is_refused_in_every_process_writing_nothing(tmp_path):
    argv = ("--model", "vit", "--data", "shapes:100", "--epochs", "1", "--batch-size", "6")
    port = _free_port()
    results = _finish([_start(pid, port, tmp_path / "run", *argv) for pid in (0, 1)])
    for rc, _, stderr in results:  # 2 processes x 2 CPU devices: 6 does not split in 4
        errors = [ln for ln in stderr.splitlines() if ln.startswith("toolkit: error:")]
        assert rc == 2 and len(errors) == 1, stderr[-3000:]
        assert "batch size 6 does not split evenly across the 4 devices of 2 processes" in errors[0]
    assert list(tmp_path.iterdir()) == []
