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
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from toolkit.errors import UsageError

MULTI_PROCESS = "multi-process"  # the --strategy name
DEFAULT_TIMEOUT = 120  # seconds to wait for the other processes (--connect-timeout)
# flag -> the Keras variable it defaults to
ENV = {
    "--coordinator": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "--num-processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "--process-id": "KERAS_DISTRIBUTION_PROCESS_ID",
}
_RETRY_S = 0.2  # between connection attempts to process 0


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
    return None


def fingerprint(settings: Mapping[str, object]) -> str:
    """A digest of what every process must agree on (the run's options)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rendezvous(cluster: Cluster, settings: str) -> None:
    """Meet every process of `cluster` on the coordinator's port within `cluster.timeout`
    seconds, all with the same `settings` digest; UsageError (one line) otherwise."""
    if cluster.num_processes == 1:
        return
    print(  # the wait can be long (--connect-timeout): say what is awaited
        f"{cluster.describe()}: waiting up to {cluster.timeout} s for the other processes at "
        f"{cluster.coordinator}",
        flush=True,
    )
    if cluster.writer:
        _host(cluster, settings)
    else:
        _join(cluster, settings)


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


def _host(cluster: Cluster, settings: str) -> None:
    """Process 0: accept every other process, check it, then answer all of them."""
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
                conn.shutdown(socket.SHUT_WR)
            for conn in peers.values():  # the peers close first: the port is free again
                try:
                    _receive(conn, time.monotonic() + 5)
                except (ConnectionError, OSError, ValueError):
                    pass
        finally:
            for conn in peers.values():
                conn.close()
    if problem:
        raise UsageError(problem)


def _join(cluster: Cluster, settings: str) -> None:
    """Process I > 0: reach process 0 (retrying until the deadline) and wait for its answer."""
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
    with conn:
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


def connect(cluster: Cluster, settings: str) -> None:
    """Rendezvous, then start JAX's distributed runtime: every device of every process is
    visible to JAX afterwards (`keras.distribution.list_devices()`)."""
    rendezvous(cluster, settings)
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


def barrier(name: str) -> None:
    """Wait until every process of the run reaches the barrier `name`."""
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
