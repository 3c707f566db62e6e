"""The local server the browser runtimes load from: 127.0.0.1 on a free port, in a thread,
serving the harness page, the toolkit's JS modules, the pinned npm packages' files from the
cache and the model files, with the cross-origin isolation headers that allow WebAssembly
threads (SharedArrayBuffer). Nothing is fetched from a CDN: a path not registered is a 404."""

from __future__ import annotations

import fnmatch
import mimetypes
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
}
TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm"}


class _Mounts:
    """URL path -> content: pages (bytes), single files and folders limited to glob patterns."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}
        self.files: dict[str, Path] = {}
        self.trees: dict[str, tuple[Path, tuple[str, ...]]] = {}
        self.lock = threading.Lock()

    def find(self, url_path: str) -> bytes | Path | None:
        """What `url_path` serves, or None (not registered, or outside a tree's patterns)."""
        with self.lock:
            if url_path in self.pages:
                return self.pages[url_path]
            if url_path in self.files:
                return self.files[url_path]
            for prefix, (folder, patterns) in self.trees.items():
                rel = url_path[len(prefix) :]
                if url_path.startswith(prefix) and ".." not in rel.split("/"):
                    if any(fnmatch.fnmatchcase(rel, p) for p in patterns):
                        return folder / rel
        return None


def _handler(mounts: _Mounts) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            path = unquote(urlsplit(self.path).path)
            found = mounts.find(path)
            try:
                body = found if isinstance(found, bytes) else found.read_bytes() if found else None
            except OSError:
                body = None
            if body is None:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            suffix = Path(path).suffix
            kind = TYPES.get(suffix) or mimetypes.guess_type(path)[0] or "application/octet-stream"
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in ISOLATION_HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args) -> None:  # noqa: A002
            pass  # quiet: the harness's requests are no user's business

    return Handler


class LocalServer:
    """A ThreadingHTTPServer on 127.0.0.1 (free port) in a daemon thread; `close()` stops it."""

    def __init__(self) -> None:
        self._mounts = _Mounts()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self._mounts))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.origin = f"http://127.0.0.1:{self._server.server_address[1]}"

    def page(self, url_path: str, body: bytes) -> str:
        """Serve `body` at `url_path`; its full URL."""
        with self._mounts.lock:
            self._mounts.pages[url_path] = body
        return self.origin + url_path

    def file(self, url_path: str, path: Path) -> str:
        """Serve the file at `path` at `url_path`; its full URL."""
        with self._mounts.lock:
            self._mounts.files[url_path] = path
        return self.origin + url_path

    def tree(self, prefix: str, folder: Path, patterns: tuple[str, ...]) -> str:
        """Serve the files under `folder` matching `patterns` below `prefix` (ends in /)."""
        with self._mounts.lock:
            self._mounts.trees[prefix] = (folder, patterns)
        return self.origin + prefix

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
