"""Measure ONE (artifact, runtime, batch) in a fresh process and print one JSON line.

    python -m toolkit.runtimes.worker --artifact RUN/export/model.onnx --runtime ort-cuda --runs 200

`toolkit bench` (one worker per row) and the int8 recipe search of `toolkit export` (one per
candidate) time artifacts this way, through `run_worker`, so that peak resident memory belongs to
that artifact alone and no candidate inherits another's warm caches. Only numpy and the runtime
are imported for .onnx and .tflite files (no TensorFlow: it runs on a box with onnxruntime-gpu
alone). Every row times the session's bound run (`Session.bind`): the input batch is converted
to the file's dtype once (an int8 file's quantized pixels are the app's preprocessing, not the
model's latency), ONNX Runtime's input and output stay bound on its device (on a GPU, as an app
keeps them there), so a timed call is the runtime's alone, as LiteRT's benchmark_model and
onnxruntime_perf_test time it. The line holds status ok, failed (with the reason) or
unavailable (with the reason).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from toolkit.common.argtypes import finite_float
from toolkit.runtimes import RuntimeOptions, RuntimeUnavailable, open_artifact
from toolkit.runtimes.base import Session, close_session
from toolkit.runtimes.timing import Protocol, summarize, time_calls, timed_once

MODULE = "toolkit.runtimes.worker"  # what `python -m` runs
WORKER_TIMEOUT_S = 900
INPUT_SEED = 0
TIMED_CALL = (  # what one timed call is, for reports
    "a call: the runtime on an input already in the file's dtype (`Session.bind`; int8 files' "
    "pixels quantized once, as an app's preprocessing)"
)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB.

    Linux: VmHWM of /proc/self/status, which starts afresh at exec (ru_maxrss does not: it
    keeps the parent's peak from before the fork, so every worker would report the parent's).
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def input_batch(shape: tuple[int | None, ...], batch: int) -> np.ndarray:
    """A seeded batch of float32 0-255 values shaped like the input, `batch` rows."""
    if any(d is None for d in shape[1:]):
        raise ValueError(f"input shape {shape} has a dynamic dimension besides the batch")
    rng = np.random.default_rng(INPUT_SEED)
    return rng.integers(0, 256, (batch, *shape[1:])).astype(np.float32)


def measure(
    artifact: Path,
    runtime: str,
    batch: int,
    protocol: Protocol,
    threads: int | None,
    cuda_graph: bool = True,
    then: Callable[[Session], None] | None = None,
) -> dict:
    """One row: load and first-inference time, latency stats, peak RSS; never raises (`then`,
    given the session once timed and before it closes, must not either).
    `cuda_graph` False times ort-cuda node by node (no CUDA graph replay)."""
    row: dict = {
        "artifact": str(artifact),
        "runtime": runtime,
        "batch": batch,
        "threads": threads,
        "status": "failed",
        "reason": None,
    }
    row["rss_before_load_mb"] = round(peak_rss_mb(), 1)
    try:
        session, load_ms = timed_once(
            lambda: open_artifact(artifact, runtime, RuntimeOptions(threads, cuda_graph))
        )
    except RuntimeUnavailable as exc:
        return {**row, "status": "unavailable", "reason": exc.reason}
    except Exception as exc:  # noqa: BLE001  (exported but unusable: say why, keep the table)
        return {**row, "reason": one_line(exc)}
    row.update(providers=list(session.providers), load_ms=load_ms)
    try:
        images = input_batch(session.input.shape, batch)
        call = session.bind(images).run
        row["settings"] = getattr(session, "settings", None)  # e.g. ORT's session options
        _, row["first_ms"] = timed_once(call)
        # a browser runtime times its calls in the page: a round trip per call would time
        # the browser's automation, not the library (toolkit/runtimes/web/session.py)
        in_page = getattr(session, "time_calls", None)
        times = in_page(images, protocol) if in_page else time_calls(call, protocol)
        if then is not None:
            then(session)
    except Exception as exc:  # noqa: BLE001
        return {**row, "reason": one_line(exc), "peak_rss_mb": round(peak_rss_mb(), 1)}
    finally:
        close_session(session)
    stats = summarize(times, batch)
    return {**row, "status": "ok", **stats.to_dict(), "peak_rss_mb": round(peak_rss_mb(), 1)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--artifact", type=Path, required=True, help=".keras, .onnx or .tflite")
    parser.add_argument("--runtime", required=True, help="keras, litert, ort-cpu or ort-cuda")
    parser.add_argument("--batch", type=int, default=1, help="images per call (default 1)")
    parser.add_argument("--runs", type=int, help="timed calls (stop after this many)")
    parser.add_argument("--seconds", type=finite_float, help="time budget of the timed calls")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls first")
    parser.add_argument("--threads", type=int, help="intra-op threads (ORT, LiteRT)")
    parser.add_argument(
        "--no-cuda-graph",
        dest="cuda_graph",
        action="store_false",
        help="ort-cuda: run node by node, no CUDA graph replay",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.batch < 1 or args.warmup < 0 or (args.threads is not None and args.threads < 1):
        print("error: --batch and --threads must be >= 1, --warmup >= 0", file=sys.stderr)
        return 2
    if (args.runs is not None and args.runs < 1) or (
        args.seconds is not None and args.seconds <= 0
    ):
        print("error: --runs must be >= 1 and --seconds > 0", file=sys.stderr)
        return 2
    unbounded = args.runs is None and args.seconds is None
    protocol = Protocol(args.warmup, args.runs, Protocol.seconds if unbounded else args.seconds)
    row = measure(args.artifact, args.runtime, args.batch, protocol, args.threads, args.cuda_graph)
    print(json.dumps(row), flush=True)
    return 0


def worker_command(
    path: Path,
    runtime: str,
    batch: int,
    protocol: Protocol,
    threads: int | None,
    cuda_graph: bool = True,
) -> list[str]:
    """The `python -m toolkit.runtimes.worker` argv that measures one row."""
    argv = [sys.executable, "-m", MODULE, "--artifact", str(path), "--runtime", runtime]
    argv += ["--batch", str(batch), "--warmup", str(protocol.warmup)]
    argv += ["--runs", str(protocol.runs)] if protocol.runs is not None else []
    argv += ["--seconds", str(protocol.seconds)] if protocol.seconds is not None else []
    argv += ["--threads", str(threads)] if threads is not None else []
    return argv + ([] if cuda_graph else ["--no-cuda-graph"])


def worker_env(runtime: str) -> dict[str, str]:
    """This process's environment for a worker of `runtime`, with this checkout importable
    (`import toolkit` imports no Keras: only the keras runtime loads it)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def run_worker(
    path: Path,
    runtime: str,
    batch: int,
    protocol: Protocol,
    threads: int | None,
    timeout_s: float = WORKER_TIMEOUT_S,
    cuda_graph: bool = True,
) -> dict:
    """One row measured in a fresh worker; a crash, a timeout or garbage is a failed row."""
    argv = worker_command(path, runtime, batch, protocol, threads, cuda_graph)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=worker_env(runtime)
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"worker timed out after {timeout_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "failed", "reason": f"worker crashed ({how}): {last}"}


if __name__ == "__main__":
    sys.exit(main())
