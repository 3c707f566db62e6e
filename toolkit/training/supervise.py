"""The supervisor of one process of a multi-process run: `toolkit train --strategy
multi-process` trains in a child process (the same command), and turns the child's abnormal
death into one line and exit code 1.

Why: JAX's runtime ends the process from a C++ thread (LOG(FATAL), SIGABRT, exit 134, a stack
trace) as soon as it sees process 0, which hosts its coordination service, gone; Python
cannot catch that, and a callback in its place cannot be given from Python (jaxlib fails to
pass it the error). The child's own liveness channel (toolkit.training.cluster.Peers) reports
a lost process in one line when it sees it first; when JAX is first, the child dies.

So the supervisor passes the child's stdout straight through and holds each stderr line for
HOLD_S seconds before passing it on, and every line from JAX's fatal log line on until the
child ends (its abort may take longer than HOLD_S on a loaded CPU): when the child fails, the
lines of its last moments (JAX's fatal log, a traceback of the collective that failed) are
dropped and one line stands for them: the child's own `toolkit: error:` line if it wrote one
then, else (a death by a signal) one naming the signal and, for JAX's abort, the process it
lost (see `_death_line`); nothing more where the child said what stopped it before JAX aborted
it on its way out.
The toolkit's own exit codes (0, 1, 2, 130) pass through; a death by a signal is 1. The
child dies with its supervisor (Linux: PR_SET_PDEATHSIG): killing the process one started
stops the training.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from toolkit.common.backend import choose_backend
from toolkit.common.errors import UsageError
from toolkit.training.cluster import Cluster

WORKER_ENV = "TOOLKIT_TRAIN_WORKER"  # set in the child: it trains, unsupervised
HOLD_S = 1.0  # seconds each stderr line of the child waits before it is passed on
OWN_EXITS = (0, 1, 2, 130)  # what `toolkit` returns by itself: passed through
ERROR = b"toolkit: error:"
FATAL = re.compile(rb"F\d{4} ")  # a glog FATAL line (JAX's "Terminating process because ...")


def is_worker() -> bool:
    """Whether this process is a supervised child (or must not be supervised)."""
    return bool(os.environ.get(WORKER_ENV))


def check_backend() -> None:
    """UsageError unless Keras runs on JAX (what --strategy multi-process trains with), told
    before a child is started; without importing Keras."""
    backend = choose_backend()
    if backend != "jax":
        raise UsageError(
            f"--strategy multi-process is not available on the {backend} backend: "
            "train with KERAS_BACKEND=jax, or use --strategy default"
        )


def die_with_parent() -> None:
    """Linux: have the kernel kill this process when its parent (the supervisor) dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the child outlives a killed supervisor
        return
    if os.getppid() == 1:  # the supervisor died before prctl
        os._exit(1)


def supervise(
    argv: list[str], cluster: Cluster, out: Path | None, command: list[str] | None = None
) -> int:
    """Run `toolkit ARGV` (or `command`) as this process's child; its exit code, or 1 with
    one line when it died by a signal."""
    env = {**os.environ, WORKER_ENV: "1"}
    command = command or [sys.executable, "-m", "toolkit.cli.main", *argv]
    child = subprocess.Popen(command, stderr=subprocess.PIPE, env=env)
    forwarded = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        forwarded[sig] = signal.signal(sig, lambda number, _: child.send_signal(number))
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's reaches both
    lines: queue.Queue[bytes | None] = queue.Queue()
    reader = threading.Thread(target=_read, args=(child.stderr, lines), daemon=True)
    reader.start()
    held: collections.deque[tuple[float, bytes]] = collections.deque()
    said = False  # the child's own `toolkit: error:` line was passed on
    dying = False  # JAX logged its fatal line: hold everything until the child ends
    try:
        done = False
        while not done:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                line = b""
            if line is None:
                done = True
            elif line:
                held.append((time.monotonic(), line))
                dying = dying or bool(FATAL.match(line))
            while held and (done or (not dying and time.monotonic() - held[0][0] >= HOLD_S)):
                if done and child.wait() != 0:
                    break
                line = held.popleft()[1]
                said = said or line.startswith(ERROR)
                _write(line)
        code = child.wait()
    finally:
        for sig, handler in forwarded.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGINT, previous_int)
    own = [line for _, line in held if line.startswith(ERROR)]
    if own:  # its one line, without what JAX logged in the same moments
        _write(own[-1])
    elif said:  # it said what stopped it, and JAX aborted it on the way out
        pass
    elif code in OWN_EXITS:
        for _, line in held:
            _write(line)
    else:
        _write(_death_line(code, cluster, out).encode() + b"\n")
    return code if code in OWN_EXITS else 1


def _read(stream, lines: queue.Queue) -> None:
    for line in iter(stream.readline, b""):
        lines.put(line)
    lines.put(None)


def _write(line: bytes) -> None:
    stream = getattr(sys.stderr, "buffer", None)
    if stream is None:  # a text-only stderr (a test's capture)
        sys.stderr.write(line.decode(errors="replace"))
    else:
        stream.write(line)
    sys.stderr.flush()


def _death_line(code: int, cluster: Cluster, out: Path | None) -> str:
    """The one line of a child that died by a signal (`code` < 0) or aborted (134). JAX
    aborts a process when another is lost: process 0 (its coordination service) for the
    others; for process 0, the one other process of a two-process run."""
    number = -code if code < 0 else code - 128
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"exit code {code}"
    where = f"--out {out} " if out is not None else "--out RUN "
    way = (
        f"resume the run from its last complete epoch with `toolkit train {where}--resume` "
        "in every process"
    )
    count = cluster.num_processes
    if number == signal.SIGABRT:
        if not cluster.writer:
            lost = f"process 0 of {count}"
        elif count == 2:
            lost = f"process 1 of {count}"
        else:
            lost = f"one of processes 1 to {count - 1}"
        return (
            f"toolkit: error: {lost} was lost (JAX's runtime aborted {cluster.describe()}: "
            f"{name}); {way}"
        )
    return f"toolkit: error: {cluster.describe()} was ended by {name}; {way}"
