"""A tiny Hugging Face hub on 127.0.0.1: serves model files the way the hub's resolve URLs do.

``HEAD/GET /{repo}/resolve/{revision}/{file}`` answers like huggingface.co for an LFS file:
``302`` to a CDN URL (here the same server under another host name, ``localhost``, so
huggingface_hub treats it as off-hub) carrying ``X-Repo-Commit``, ``X-Linked-Etag`` and
``X-Linked-Size``; the CDN URL serves the bytes with ``ETag`` and ``Content-Length``. A file
the repository lacks gets ``404`` with ``X-Error-Code: EntryNotFound`` (what makes
huggingface_hub try the next candidate). Every request is recorded.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    """The served repositories (``{repo_id: {filename: bytes}}``) and the requests seen."""

    repos: dict[str, dict[str, bytes]]
    requests: list[tuple[str, str]] = field(default_factory=list)
    port: int = 0

    @property
    def endpoint(self) -> str:
        """The value for ``HF_ENDPOINT``."""
        return f"http://127.0.0.1:{self.port}"


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _serve(self, *, body: bool) -> None:
            hub.requests.append((self.command, self.path))
            path = self.path.split("?", 1)[0]
            if path.startswith("/cdn/"):
                self._cdn(path[len("/cdn/") :], body=body)
                return
            repo, sep, rest = path.lstrip("/").partition("/resolve/")
            revision, _, filename = rest.partition("/")
            files = hub.repos.get(repo)
            if not sep or files is None:
                self._error(404, "RepoNotFound")
                return
            if revision not in ("main", COMMIT):
                self._error(404, "RevisionNotFound")
                return
            if filename not in files:
                self._error(404, "EntryNotFound")
                return
            data = files[filename]
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{hub.port}/cdn/{repo}/{filename}")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", '"redirect-etag"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _cdn(self, key: str, *, body: bool) -> None:
            repo, _, filename = key.rpartition("/")
            data = hub.repos.get(repo, {}).get(filename)
            if data is None:
                self._error(404, "EntryNotFound")
                return
            self.send_response(200)
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _error(self, status: int, code: str) -> None:
            message = f"{code}: {self.path}".encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(message)

    return Handler


@contextmanager
def serve_fake_hub(repos: dict[str, dict[str, bytes]]) -> Iterator[FakeHub]:
    """Run a fake hub on a free 127.0.0.1 port for the duration of the block."""
    hub = FakeHub(repos=repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
