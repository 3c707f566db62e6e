"""The processes of a multi-process run (`--strategy multi-process`, JAX): who is who, and
joining them.

Every process runs the same `toolkit train` command with its own process id; process 0 is the
coordinator (its HOST:PORT is `--coordinator`) and the only one that writes the run folder.
The flags default to Keras' own variables (KERAS_DISTRIBUTION_JOB_ADDRESSES, ..._NUM_PROCESSES,
..._PROCESS_ID).

JAX ends the whole process (SIGABRT, a stack trace) when its coordination service times out,
so the processes first meet in a small TCP rendezvous on the coordinator's port: a process
that cannot reach process 0, a process 0 whose peers do not all come, and processes started
with different commands or counts are refused there in one line within `--connect-timeout`.
Only then does `jax.distributed.initialize` start, on the same port.

The rendezvous connections stay open while the run trains (`Peers`): a liveness channel. A
process that is killed (or whose host goes: TCP keepalive) closes it, and one that fails
says so on it; every other process then stops at once with one line naming the lost process
and the resume command (exit 1). Without it JAX's collectives would wait for the lost process
about a minute and then abort the survivors from a C++ thread (SIGABRT, exit 134), which
Python cannot catch: the watcher thread ends the process with os._exit first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from toolkit.common.errors import RunError, UsageError, first_line

MULTI_PROCESS = "multi-process"  # the --strategy name
DEFAULT_TIMEOUT = 120  # seconds to wait for the other processes (--connect-timeout)
# flag -> the Keras variable it defaults to
ENV = {
    "--coordinator": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "--num-processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "--process-id": "KERAS_DISTRIBUTION_PROCESS_ID",
}
_RETRY_S = 0.2  # between connection attempts to process 0
# a peer's host that vanishes (no FIN): keepalive probes after 10 s idle, 3 x 5 s apart
_KEEPALIVE = {"TCP_KEEPIDLE": 10, "TCP_KEEPINTVL": 5, "TCP_KEEPCNT": 3}
_GRACE_S = 3.0  # a peer that stopped: time for this process to stop with its own error first
_BYE_S = 10.0  # at the end, how long to wait for the others' goodbyes
_OWN_ERRORS = (UsageError, RunError, KeyboardInterrupt)  # a process's own: not a peer's loss


@dataclass(frozen=True)
class Cluster:
    """This process's place in a multi-process run."""

    coordinator: str  # HOST:PORT of process 0
    num_processes: int
    process_id: int
    timeout: int = DEFAULT_TIMEOUT  # seconds to wait for the others

    @property
    def writer(self) -> bool:
        """Whether this process writes the run folder (process 0 only)."""
        return self.process_id == 0

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) of the coordinator."""
        host, _, port = self.coordinator.rpartition(":")
        return host.strip("[]"), int(port)

    def describe(self) -> str:
        """'process I of N'."""
        return f"process {self.process_id} of {self.num_processes}"


def _given(flag: str, value: object, environ: Mapping[str, str]) -> tuple[object, str]:
    """`value` if given, else the flag's Keras variable; with the name to blame for it."""
    if value is not None:
        return value, flag
    return environ.get(ENV[flag]), ENV[flag]


def _integer(value: object, name: str) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be an integer, got {value!r}") from None


def cluster_from(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Cluster:
    """The Cluster the flags name, each missing one read from its Keras variable; UsageError
    (one line) when one is missing, malformed or inconsistent. Nothing is contacted."""
    environ = os.environ if environ is None else environ
    addresses, where = _given("--coordinator", coordinator, environ)
    if not addresses:
        raise UsageError(
            f"--strategy {MULTI_PROCESS} needs process 0's address: pass --coordinator "
            f"HOST:PORT or set {ENV['--coordinator']}"
        )
    listed = [a.strip() for a in str(addresses).split(",")]
    count, count_name = _given("--num-processes", num_processes, environ)
    if count is None and len(listed) > 1:
        count, count_name = len(listed), where
    if count is None:
        raise UsageError(
            f"--strategy {MULTI_PROCESS} needs the number of processes: pass --num-processes N "
            f"or set {ENV['--num-processes']}"
        )
    count = _integer(count, count_name)
    if count < 1:
        raise UsageError(f"{count_name} must be 1 or more, got {count}")
    if len(listed) > 1 and len(listed) != count:
        raise UsageError(
            f"{where} lists {len(listed)} addresses but {count_name} is {count}: give one "
            "address per process (process 0's first), or only process 0's"
        )
    pid, pid_name = _given("--process-id", process_id, environ)
    if pid is None:
        raise UsageError(
            f"--strategy {MULTI_PROCESS} needs this process's id: pass --process-id I (0 on "
            f"the coordinator) or set {ENV['--process-id']}"
        )
    pid = _integer(pid, pid_name)
    if not 0 <= pid < count:
        raise UsageError(
            f"{pid_name} {pid} is out of range for {count} processes: pass 0 to {count - 1}"
        )
    host, sep, port = listed[0].rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"{where} '{listed[0]}' is not HOST:PORT: pass process 0's address, e.g. "
            "10.0.0.1:1234 (a free port there)"
        )
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if timeout < 1:
        raise UsageError(f"--connect-timeout must be 1 second or more, got {timeout}")
    return Cluster(listed[0], count, pid, timeout)


def cluster_for(
    strategy: str,
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout: int | None = None,
) -> Cluster | None:
    """The Cluster of a `--strategy multi-process` run (`cluster_from`), None for another
    strategy; UsageError where cluster flags come with another strategy."""
    if strategy == MULTI_PROCESS:
        return cluster_from(coordinator, num_processes, process_id, timeout)
    given = [
        flag
        for flag, value in zip(
            ("--coordinator", "--num-processes", "--process-id", "--connect-timeout"),
            (coordinator, num_processes, process_id, timeout),
            strict=True,
        )
        if value is not None
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)}: only for --strategy {MULTI_PROCESS} (this run's strategy is "
            f"{strategy}); add --strategy {MULTI_PROCESS} or drop them"
        )
    _check_no_cluster_variables(strategy, os.environ)
    return None


def _check_no_cluster_variables(strategy: str, environ: Mapping[str, str]) -> None:
    """UsageError when Keras' variables make this process one of several but the strategy
    trains alone: each process would train its own copy of the run into the same folder."""
    count = environ.get(ENV["--num-processes"], "").strip()
    addresses = [a for a in environ.get(ENV["--coordinator"], "").split(",") if a.strip()]
    several = (count.isdigit() and int(count) > 1) or len(addresses) > 1
    if several:
        named = ENV["--num-processes"] if len(addresses) < 2 else ENV["--coordinator"]
        raise UsageError(
            f"{named}={environ[named]} makes this process one of several, but --strategy "
            f"{strategy} trains in one process: pass --strategy {MULTI_PROCESS} to train them "
            "as one run, or unset the KERAS_DISTRIBUTION_* variables"
        )


def fingerprint(settings: Mapping[str, object]) -> str:
    """A digest of what every process must agree on (the run's options)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rendezvous(cluster: Cluster, settings: str, hint: str = "") -> Peers:
    """Meet every process of `cluster` on the coordinator's port within `cluster.timeout`
    seconds, all with the same `settings` digest; UsageError (one line) otherwise. The
    connections are returned open: `with` the Peers, a lost process stops this one."""
    if cluster.num_processes == 1:
        return Peers(cluster, {}, hint)
    print(  # the wait can be long (--connect-timeout): say what is awaited
        f"{cluster.describe()}: waiting up to {cluster.timeout} s for the other processes at "
        f"{cluster.coordinator}",
        flush=True,
    )
    if cluster.writer:
        return Peers(cluster, _host(cluster, settings), hint)
    return Peers(cluster, {0: _join(cluster, settings)}, hint)


def _keepalive(conn: socket.socket) -> None:
    """Probe an idle connection, so that a peer whose host vanished is noticed in ~25 s."""
    try:  # best effort: a socket without TCP's options (a local pair) is watched all the same
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in _KEEPALIVE.items():
            if hasattr(socket, name):  # Linux; macOS has TCP_KEEPALIVE instead of _KEEPIDLE
                conn.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    except OSError:
        pass


class Peers:
    """The open connections to the other processes (process 0: to each; the others: to
    process 0) while the run trains. Inside `with`, a thread per connection watches it: a
    peer that closes it without saying goodbye was lost (killed, its host gone), one that
    says "stopped" failed; either ends this process with one line naming it and the way out
    (`hint`), exit code 1, before JAX's collectives wait on it and abort.

    An exception the loss raised here first (a collective that failed) is not the story:
    leaving the `with` on one waits a moment for a watcher to name the lost process. Where
    JAX's runtime aborts the process first (SIGABRT: process 0, which hosts its coordination
    service, died), the supervisor (toolkit.training.supervise) gives the one line. Leaving
    the `with` says goodbye (or, on an error of its own, "stopped" and its first line)."""

    def __init__(self, cluster: Cluster, conns: dict[int, socket.socket], hint: str) -> None:
        self.cluster = cluster
        self.conns = conns
        self.hint = hint
        self._lock = threading.Lock()
        self._leaving = threading.Event()  # this process ends by its own error: watch no more
        self._lost = threading.Event()  # a peer was lost: `_why` says which and how
        self._why: tuple[int, str, bool] = (0, "", False)
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Peers:
        for pid, conn in self.conns.items():
            _keepalive(conn)
            thread = threading.Thread(
                target=self._watch, args=(pid, conn), name=f"toolkit-peer-{pid}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self.conns and not isinstance(exc, _OWN_ERRORS):
            if self._lost.wait(_GRACE_S):  # the collective failed as a process was lost
                self._stop()
        self._leaving.set()
        message = {"bye": True} if exc is None else {"stopped": first_line(exc)}
        for conn in self.conns.values():
            try:
                _send(conn, message)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        wait = _BYE_S if exc is None else 1.0  # the others read it before the sockets close
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        self.close()

    def close(self) -> None:
        """Close every connection."""
        for conn in self.conns.values():
            conn.close()

    def _watch(self, pid: int, conn: socket.socket) -> None:
        """Read `pid`'s messages until its goodbye; stop this process when it is lost."""
        why = "its connection closed"
        stopped = False  # it said why (its own one line) rather than vanished
        data = b""
        try:
            while True:
                conn.settimeout(None)
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
                while b"\n" in data:
                    line, data = data.split(b"\n", 1)
                    message = json.loads(line)
                    if message.get("bye"):
                        return
                    if message.get("stopped"):
                        self._leaving.wait(_GRACE_S)  # this one's own error, if it has one
                        why = message["stopped"]
                        stopped = True
                        raise ConnectionAbortedError
        except ConnectionAbortedError:
            pass
        except (OSError, ValueError) as exc:
            why = f"its connection failed: {first_line(exc)}"
        self._lose(pid, why, stopped)
        self._stop()

    def _lose(self, pid: int, why: str, stopped: bool) -> None:
        with self._lock:
            if not self._lost.is_set():
                self._why = (pid, why, stopped)
                self._lost.set()

    def _stop(self) -> None:
        """Print the lost process's line and end this process (exit 1), unless it is ending
        with its own error already."""
        with self._lock:
            if self._leaving.is_set():
                return
            pid, why, stopped = self._why
            who = f"process {pid} of {self.cluster.num_processes}"
            if stopped:  # its own line names the problem and the way out
                line = f"toolkit: error: {who} stopped: {why}"
            else:
                way = f": {self.hint}" if self.hint else ""
                line = (
                    f"toolkit: error: {who} was lost ({why}); {self.cluster.describe()} stops{way}"
                )
            try:
                sys.stdout.flush()
                print(line, file=sys.stderr, flush=True)
            finally:
                os._exit(1)


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _receive(conn: socket.socket, deadline: float) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        conn.settimeout(max(deadline - time.monotonic(), 0.01))
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return json.loads(data)


def _listen(cluster: Cluster) -> socket.socket:
    port = cluster.address[1]
    try:
        if socket.has_dualstack_ipv6():
            return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
        return socket.create_server(("", port))
    except OSError as exc:
        raise UsageError(
            f"process 0 cannot listen on port {port} of --coordinator {cluster.coordinator} "
            f"({exc.strerror or exc}): pass a free port"
        ) from None


def _host(cluster: Cluster, settings: str) -> dict[int, socket.socket]:
    """Process 0: accept every other process, check it, then answer all of them; the open
    connections, by process id."""
    deadline = time.monotonic() + cluster.timeout
    peers: dict[int, socket.socket] = {}
    problem = ""
    with _listen(cluster) as server:
        try:
            while len(peers) < cluster.num_processes - 1 and not problem:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(1, cluster.num_processes)) - set(peers))
                    raise UsageError(
                        f"process 0 waited {cluster.timeout} s on {cluster.coordinator} for "
                        f"process(es) {', '.join(map(str, missing))} of {cluster.num_processes}:"
                        " start every process with the same command and its own --process-id, "
                        "or raise --connect-timeout"
                    )
                server.settimeout(left)
                try:
                    conn, _ = server.accept()
                    hello = _receive(conn, deadline)
                except (TimeoutError, OSError, ValueError):
                    continue
                pid = hello.get("process_id")
                if hello.get("num_processes") != cluster.num_processes:
                    problem = (
                        f"process {pid} was started with {hello.get('num_processes')} processes "
                        f"and process 0 with {cluster.num_processes}: give every process the "
                        "same --num-processes"
                    )
                elif pid in peers or pid == 0:
                    problem = f"two processes have --process-id {pid}: give each its own"
                elif hello.get("settings") != settings:
                    problem = (
                        f"process {pid} was started with other training settings than "
                        "process 0: run the same `toolkit train` command in every process"
                    )
                peers[pid] = conn
            for conn in peers.values():
                _send(conn, {"error": problem} if problem else {"ok": True})
            if not problem:
                return peers  # kept open: the liveness channel (Peers)
            for conn in peers.values():
                conn.shutdown(socket.SHUT_WR)
            for conn in peers.values():  # the peers close first: the port is free again
                try:
                    _receive(conn, time.monotonic() + 5)
                except (ConnectionError, OSError, ValueError):
                    pass
        except BaseException:
            problem = problem or "failed"
            raise
        finally:
            if problem:
                for conn in peers.values():
                    conn.close()
    raise UsageError(problem)


def _join(cluster: Cluster, settings: str) -> socket.socket:
    """Process I > 0: reach process 0 (retrying until the deadline) and wait for its answer;
    the connection, open."""
    deadline = time.monotonic() + cluster.timeout
    host, port = cluster.address
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=max(_RETRY_S, 1.0))
            break
        except OSError:
            if time.monotonic() + _RETRY_S >= deadline:
                raise UsageError(
                    f"{cluster.describe()} could not reach the coordinator "
                    f"{cluster.coordinator} within {cluster.timeout} s: start process 0 "
                    "there (--process-id 0), check --coordinator, or raise --connect-timeout"
                ) from None
            time.sleep(_RETRY_S)
    try:
        _send(
            conn,
            {
                "process_id": cluster.process_id,
                "num_processes": cluster.num_processes,
                "settings": settings,
            },
        )
        try:
            answer = _receive(conn, deadline)
        except (ConnectionError, OSError, ValueError):
            raise UsageError(
                f"{cluster.describe()} reached {cluster.coordinator} but process 0 did not "
                f"answer within {cluster.timeout} s: is another program on that port?"
            ) from None
        if answer.get("error"):
            raise UsageError(answer["error"])
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def connect(cluster: Cluster, settings: str, hint: str = "") -> Iterator[Peers]:
    """Rendezvous, then start JAX's distributed runtime: every device of every process is
    visible to JAX afterwards (`keras.distribution.list_devices()`). Inside, a lost process
    stops this one in one line ending in `hint` (Peers)."""
    with rendezvous(cluster, settings, hint) as peers:
        import jax

        try:
            jax.distributed.initialize(
                coordinator_address=cluster.coordinator,
                num_processes=cluster.num_processes,
                process_id=cluster.process_id,
                initialization_timeout=cluster.timeout,
            )
        except RuntimeError as exc:  # JAX already ran something in this process
            raise UsageError(
                f"cannot join the other processes: {str(exc).splitlines()[0]} (start "
                "`toolkit train --strategy multi-process` in a fresh process)"
            ) from None
        yield peers


def barrier(name: str) -> None:
    """Wait until every process of the run reaches the barrier `name`."""
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
