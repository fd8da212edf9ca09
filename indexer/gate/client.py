"""HTTP client for server mode: upload a split, wait for its audit, download the report.

Failures map onto the CLI's exit codes: the server unreachable or answering 5xx ->
``ServerError`` (exit 3); a 4xx -> the server's own message as the library error whose
``http_status`` it is (``AuthError`` also for 403, else ``InputError``; all exit 2).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from splitaudit.indexer.errors import (
    AuthError,
    ConflictError,
    InputError,
    NotFoundError,
    ServerError,
    SplitauditError,
    UploadTooLargeError,
    UsageError,
)
from splitaudit.indexer.gate.zipstream import ZipStream, folder_files
from splitaudit.indexer.sources.archive import archive_kind

logger = logging.getLogger(__name__)

API = "/api/v1"
Progress = Callable[[int], object]


class _CountingReader:
    """A binary file whose reads are reported (httpx still sees its size through ``fileno``)."""

    def __init__(self, fh: IO[bytes], on_read: Progress | None) -> None:
        self._fh = fh
        self._on_read = on_read
        self.name = getattr(fh, "name", "upload")

    def fileno(self) -> int:
        """The wrapped file's descriptor (lets httpx send a Content-Length)."""
        return self._fh.fileno()

    def read(self, size: int = -1) -> bytes:
        """Read and report ``size`` bytes."""
        data = self._fh.read(size)
        if data and self._on_read is not None:
            self._on_read(len(data))
        return data


def _open(path: Path) -> IO[bytes]:
    """Open a file to upload; ``InputError`` when it cannot be read."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def error_message(response: httpx.Response) -> str:
    """The server's ``{"error": {"message"}}`` text, else the start of the body."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if "detail" in body:
            return str(body["detail"])
    text = response.text.strip().splitlines()
    return text[0][:300] if text else response.reason_phrase


# The errors a 4xx answer turns back into, matched on the status each class carries.
_ANSWER_ERRORS: tuple[type[SplitauditError], ...] = (
    AuthError,
    NotFoundError,
    UploadTooLargeError,
    ConflictError,
    UsageError,
)


def error_for_answer(status: int, message: str) -> SplitauditError:
    """The library error for a failed HTTP answer: the class raised with that status on the server.

    5xx is a ``ServerError``; 403 reads as a token problem too (a proxy in front of the
    server answers it); any other 4xx is an ``InputError``.
    """
    if status >= 500:
        return ServerError(message)
    if status == 403:
        cls: type[SplitauditError] = AuthError
    else:
        cls = next((c for c in _ANSWER_ERRORS if c.http_status == status), InputError)
    if cls is AuthError:
        message = f"{message}; set SPLITAUDIT_TOKEN to a valid API token"
    return cls(message)


class AuditClient:
    """Talks to ``splitaudit serve`` at ``base_url`` (``Authorization: Bearer`` when a token is given)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(f"--server takes an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        )

    def __enter__(self) -> AuditClient:
        """Use as a context manager; closes the connection pool on exit."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection pool."""
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; transport failures and error statuses become splitaudit errors."""
        try:
            response = self._http.request(method, API + path, **kwargs)
        except httpx.TransportError as exc:
            raise ServerError(
                f"cannot reach the splitaudit server at {self.base_url}: {exc or type(exc).__name__}; "
                "check --server and that `splitaudit serve` is running"
            ) from exc
        if response.is_success:
            return response
        message = (
            f"server answered {response.status_code} to {method} {path}: {error_message(response)}"
        )
        raise error_for_answer(response.status_code, message)

    def _json(self, response: httpx.Response) -> Any:
        """The decoded JSON body; a non-JSON success answer is a server error."""
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ServerError(
                f"the server at {self.base_url} answered with something other than JSON"
            ) from exc

    def submit(
        self,
        split: Path,
        *,
        corpora: Sequence[str],
        labels: Path | None = None,
        label_names: Path | None = None,
        thresholds: Mapping[str, float] | None = None,
        progress: Callable[[int], Progress] | None = None,
        allow_empty: bool = False,
    ) -> int:
        """Upload ``split`` (a folder, zipped on the fly, or a zip/tar archive); returns the audit id.

        ``progress(total_bytes)`` is called once with the byte count to send and returns the
        per-chunk callback (e.g. a progress bar's ``update``).
        """
        split = Path(split)
        data: dict[str, Any] = {"corpus": list(corpora), "name": split.resolve().name or "split"}
        if thresholds:
            data["thresholds"] = json.dumps(dict(thresholds))
        if allow_empty:  # the audit may pass although it checks nothing
            data["allow_empty"] = "true"
        with contextlib.ExitStack() as stack:
            upload: Any
            if split.is_dir():
                files = folder_files(split)
                if not files:
                    raise InputError(f"{split} holds no files to audit")
                total = sum(f.size for f in files)
                upload = ZipStream(files, on_read=progress(total) if progress else None)
                name, ctype = f"{split.resolve().name or 'split'}.zip", "application/zip"
            elif split.is_file() and archive_kind(split) is not None:
                fh = stack.enter_context(_open(split))
                upload = _CountingReader(fh, progress(split.stat().st_size) if progress else None)
                name, ctype = split.name, "application/octet-stream"
            elif split.exists():
                raise UsageError(
                    f"server mode uploads a folder or a zip/tar archive; {split} is neither. "
                    "Audit a manifest locally (--home) or put its images in a folder"
                )
            else:
                raise InputError(f"{split} does not exist")
            files_field: list[tuple[str, tuple[str, Any, str]]] = [("split", (name, upload, ctype))]
            for field, path in (("labels", labels), ("label_names", label_names)):
                if path is not None:
                    extra = stack.enter_context(_open(Path(path)))
                    files_field.append(
                        (field, (Path(path).name, extra, "application/octet-stream"))
                    )
            body = self._json(self._request("POST", "/audits", data=data, files=files_field))
        if not isinstance(body, Mapping) or not isinstance(body.get("id"), int):
            raise ServerError(f"the server accepted the split but returned no audit id: {body!r}")
        return int(body["id"])

    def status(self, audit_id: int) -> dict[str, Any]:
        """``GET /audits/{id}``: status, progress, summary."""
        body = self._json(self._request("GET", f"/audits/{audit_id}"))
        if not isinstance(body, dict):
            raise ServerError(f"unexpected answer for audit {audit_id}: {body!r}")
        return body

    def wait(
        self,
        audit_id: int,
        *,
        on_progress: Callable[[float, str], object] | None = None,
        poll_interval: float = 0.5,
        max_interval: float = 5.0,
        timeout: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any]:
        """Poll until the audit is ``done`` (returns its status) or ``failed`` (``ServerError``).

        ``on_progress(fraction, message)`` sees each poll; a few transport failures in a row
        are retried (a server restart picks queued audits up again).
        """
        start = time.monotonic()
        interval, misses = poll_interval, 0
        while True:
            try:
                state = self.status(audit_id)
                misses = 0
            except ServerError:
                misses += 1
                if misses > 3:
                    raise
                logger.info("audit %s: server not answering, retrying", audit_id)
                state = {"status": "unknown"}
            status = state.get("status")
            if on_progress is not None and status != "unknown":
                on_progress(_fraction(state.get("progress")), str(state.get("message") or status))
            if status == "done":
                return state
            if status == "failed":
                reason = state.get("error") or state.get("message") or "no reason given"
                raise ServerError(f"audit {audit_id} failed on the server: {reason}")
            if timeout is not None and time.monotonic() - start > timeout:
                raise ServerError(
                    f"audit {audit_id} still {status} after {timeout:.0f}s; "
                    f"see {self.base_url}{API}/audits/{audit_id}"
                )
            sleep(interval)
            interval = min(interval * 1.5, max_interval)

    def report(self, audit_id: int) -> dict[str, Any]:
        """``GET /audits/{id}/report?format=json``: the ``splitaudit.report/v1`` dict."""
        body = self._json(
            self._request("GET", f"/audits/{audit_id}/report", params={"format": "json"})
        )
        if not isinstance(body, dict) or "items" not in body:
            raise ServerError(f"the report of audit {audit_id} is not a splitaudit report")
        return body

    def thumbnail(self, side: str, item_id: int, *, size: int = 160) -> bytes:
        """A downscaled image of a split item (``side`` = ``split``) or a corpus item, as encoded bytes."""
        path = (
            f"/split-items/{item_id}/thumbnail"
            if side == "split"
            else f"/items/{item_id}/thumbnail"
        )
        return self._request("GET", path, params={"size": size}).content


def _fraction(value: Any) -> float:
    """Progress as a fraction in [0, 1] (servers may send 0-1 or 0-100)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if number > 1.0:
        number /= 100.0
    return max(0.0, min(1.0, number))
