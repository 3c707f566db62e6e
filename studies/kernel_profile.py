"""Which native kernels an artifact's batch-1 calls spend their CPU time in, sampled by `perf`.

    python -m studies.kernel_profile FILE [--runtime R] [--threads N] [--seconds 5]
        [--top 15]

LiteRT's Python API has no op profiler, and XNNPACK runs a whole graph as one delegate node, so
`studies.op_profile` can only list a .tflite's ops. Here Linux `perf` samples the process
itself while it calls the file in a loop: `perf record -e cpu-clock -p PID` (a software event,
so it works in VMs without hardware counters) on every thread of this process, after the
session is open and warm. Each row is one symbol's share of the samples. XNNPACK's microkernel
names say what arithmetic runs (`xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_3x8c8__avx2`: int8 GEMM
on AVX2, no VNNI; `xnn_f32_gemm_..._fma3`: fp32 GEMM), and `thread_main` or
`pthreadpool_parallelize` is time the threads spend waiting for each other. ONNX Runtime's
wheel has no symbols, so for .onnx files `op_profile` is the tool.

Needs `perf` (Debian: linux-perf) and permission to sample (root, or perf_event_paranoid <= 2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.common.argtypes import OneLineParser, positive_int  # noqa: E402
from toolkit.common.errors import UsageError  # noqa: E402
from toolkit.common.progress import progress  # noqa: E402
from toolkit.runtimes import open_artifact  # noqa: E402
from toolkit.runtimes.base import RuntimeOptions  # noqa: E402
from toolkit.runtimes.worker import input_batch  # noqa: E402

SAMPLE_HZ = 4000  # samples per second per thread: enough for 0.1% rows in a few seconds
WARMUP_CALLS = 50


@dataclass(frozen=True)
class KernelRow:
    """One symbol of the report: its share of all samples and the library it lives in."""

    share: float  # 0-1
    library: str
    symbol: str


def _first_line(text: str) -> str:
    """The first line of a tool's message, for a one-line error."""
    return (text.strip().splitlines() or ["no message"])[0]


def perf_binary() -> str:
    """The `perf` executable, checked to be able to sample here (UsageError otherwise)."""
    perf = shutil.which("perf")
    if perf is None:
        raise UsageError("perf not found: install it (Debian: apt install linux-perf) to profile")
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(
            [perf, "record", "-q", "-e", "cpu-clock", "-o", f"{folder}/probe", "--", "true"],
            capture_output=True,
            text=True,
        )
    if probe.returncode != 0:
        raise UsageError(
            f"perf cannot sample here ({_first_line(probe.stderr)}): "
            "run as root or lower perf_event_paranoid"
        )
    return perf


def parse_report(text: str) -> list[KernelRow]:
    """Rows of `perf report --stdio --sort dso,sym -t TAB` output, largest share first."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) < 3 or not fields[0].endswith("%"):
            continue
        symbol = fields[2].split("] ", 1)[-1]  # drop perf's "[.] " (user) / "[k] " (kernel)
        rows.append(KernelRow(float(fields[0].rstrip("%")) / 100.0, fields[1], symbol))
    return sorted(rows, key=lambda r: -r.share)


def profile(
    path: Path, runtime: str | None, threads: int, seconds: float, perf: str
) -> tuple[list[KernelRow], int, float]:
    """Sample this process while it calls `path` at batch 1 for about `seconds`: (rows, calls
    made, seconds they took)."""
    progress("kernel profile step", 1, 3, f"opening {path.name}, {WARMUP_CALLS} warm-up calls")
    session = open_artifact(path, runtime, RuntimeOptions(threads=threads))
    call = session.bind(input_batch(session.input.shape, 1)).run  # what `toolkit bench` times
    for _ in range(WARMUP_CALLS):
        call()
    progress("kernel profile step", 2, 3, f"calling it for {seconds:g} s under perf record")
    with tempfile.TemporaryDirectory(prefix="kernel-profile-") as folder:
        data = f"{folder}/perf.data"
        record = [perf, "record", "-q", "-e", "cpu-clock", "-F", str(SAMPLE_HZ)]
        sampler = subprocess.Popen(
            [*record, "-p", str(os.getpid()), "-o", data, "--", "sleep", str(seconds)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        calls, started = 0, time.monotonic()
        while sampler.poll() is None and time.monotonic() - started < seconds + 30:
            call()
            calls += 1
        elapsed = time.monotonic() - started
        if sampler.poll() is None:  # perf outlived its `sleep` by far
            sampler.kill()
            sampler.communicate()
            raise UsageError(f"perf record did not stop within {seconds + 30:g} s")
        _, err = sampler.communicate()
        if sampler.returncode != 0:
            raise UsageError(f"perf record failed: {_first_line(err)}")
        progress("kernel profile step", 3, 3, "perf report")
        report = subprocess.run(
            [perf, "report", "-i", data, "--stdio", "--sort", "dso,sym", "-t", "\t"],
            capture_output=True,
            text=True,
        )
    if report.returncode != 0:
        raise UsageError(f"perf report failed: {_first_line(report.stderr)}")
    return parse_report(report.stdout), calls, elapsed


def markdown(
    path: Path, rows: list[KernelRow], top: int, calls: int, elapsed: float, sampled: float
) -> str:
    """The `top` symbols as a table, the rest summed in one line."""
    lines = [
        f"{path}: {calls} batch-1 calls in {elapsed:.1f} s ({1e3 * elapsed / max(calls, 1):.3f} "
        f"ms a call), {sampled:g} s of them sampled by perf (cpu-clock, all threads)",
        "| share | library | symbol |",
        "|---:|---|---|",
        *(f"| {r.share:.1%} | {r.library} | `{r.symbol}` |" for r in rows[:top]),
    ]
    rest = sum(r.share for r in rows[top:])
    if rest:
        lines.append(f"| {rest:.1%} | | {len(rows) - top} other symbols |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m studies.kernel_profile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("artifact", type=Path, help="a .tflite or .onnx file")
    parser.add_argument("--runtime", help="runtime to open it in (default: by suffix)")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=positive_int, default=5, help="sampling time")
    parser.add_argument("--top", type=positive_int, default=15, help="symbols listed")
    try:
        args = parser.parse_args(argv)
        perf = perf_binary()
        rows, calls, elapsed = profile(
            args.artifact, args.runtime, args.threads, args.seconds, perf
        )
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown(args.artifact, rows, args.top, calls, elapsed, args.seconds), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
