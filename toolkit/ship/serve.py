"""`toolkit ship --serve`: the bundle folder over HTTP on 127.0.0.1 (Python's http.server), with
the content types a browser needs for the web app (.wasm, .mjs), the cross-origin isolation
headers its libraries' threaded WebAssembly needs, and no caching, so that a bundle shipped again
is what the page loads. The port is bound before the work, so a taken port is bad
input, not a failure after minutes."""

from __future__ import annotations

import errno
import os
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from toolkit.common.errors import UsageError

HOST = "127.0.0.1"  # this machine only: the bundle is not offered to the network
DEFAULT_PORT = 8000
TYPES = {
    ".wasm": "application/wasm",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".tflite": "application/octet-stream",
    ".onnx": "application/octet-stream",
    ".ort": "application/octet-stream",
}


# cross-origin isolation: the page may use SharedArrayBuffer, so WebAssembly threads
ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
}


class BundleHandler(SimpleHTTPRequestHandler):
    """Static files of one folder, typed for browsers, never cached."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **TYPES}

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        for name, value in ISOLATION_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()


def bind(folder: Path, port: int) -> ThreadingHTTPServer:
    """A server of `folder` bound to 127.0.0.1:`port` (0: any free port), not yet serving; a
    taken or forbidden port is a UsageError."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a TCP port: pass 1 to 65535, or 0 for any free one")
    handler = partial(BundleHandler, directory=os.path.abspath(folder))
    try:
        return ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        raise UsageError(
            f"--port {port} {why} on {HOST}: pass another --port (0: any free port)"
        ) from exc


def url(server: ThreadingHTTPServer, path: str = "") -> str:
    """The address of `path` in the served folder."""
    return f"http://{HOST}:{server.server_address[1]}/{path}"
