"""The splitaudit exception tree; each class carries its HTTP status and CLI exit code.

    SplitauditError                 base of everything raised on purpose (HTTP 500, exit 3)
    ├── UsageError                  bad arguments or options (HTTP 400, exit 2)
    ├── InputError                  a source, split, manifest or archive cannot be used (HTTP 422, exit 2)
    │   ├── UnsafeArchiveError      an archive member escapes its root (absolute path, ``..``, link)
    │   ├── PathNotAllowedError     a server-side path lies outside the configured roots (HTTP 403)
    │   ├── UploadTooLargeError     an upload exceeds the configured limit (HTTP 413)
    │   └── EmptyAuditError         nothing to audit: no readable test image, or an empty corpus
    ├── NotFoundError               a corpus, audit, match or item does not exist (HTTP 404, exit 2)
    │   └── SourceMissingError      an item's original bytes are gone or changed (thumbnails, HTML report)
    ├── ConflictError               the request contradicts stored state, e.g. another model (HTTP 409, exit 2)
    │   └── ModelMismatchError      a corpus is indexed with a different embedding model
    ├── IndexMismatchError          a FAISS store's sidecar disagrees with the DB or the request (HTTP 500, exit 3)
    ├── IndexUnavailableError       the local index (--home) does not exist (HTTP 500, exit 3)
    ├── ModelUnavailableError       embedding weights cannot be loaded: semantic tier skipped (HTTP 500, exit 2)
    ├── AuthError                   missing or wrong API token (HTTP 401, exit 2)
    │   └── PermissionDeniedError   a valid token whose role does not allow this (HTTP 403)
    ├── ServerError                 the audit server is unreachable or failed (HTTP 500, exit 3)
    └── ImageDecodeError            one image cannot be decoded; recorded as a failed item (HTTP 422, exit 2)

A subclass inherits its parent's status and exit code unless the tree says otherwise. The
API's error handler (``app/errors.py``), the CLI (``indexer/cli/common.py``) and the audit
client's reverse mapping (``indexer/gate/client.py``) all read ``http_status`` /
``exit_code`` from here; nothing else decides them.

Per-image problems (corrupt file, decompression bomb, ...) are *not* raised out of a
run: they are recorded as failed items with a reason (see ``ImageDecodeError``).
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class SplitauditError(Exception):
    """Base class; the message says what went wrong and what to do."""

    code: ClassVar[str] = "error"
    http_status: ClassVar[int] = 500
    exit_code: ClassVar[int] = EXIT_INTERNAL


class UsageError(SplitauditError):
    """Bad command-line arguments or API parameters."""

    code = "bad_request"
    http_status = 400
    exit_code = EXIT_USAGE


class InputError(SplitauditError):
    """A source, split, manifest or archive cannot be used as given."""

    code = "bad_input"
    http_status = 422
    exit_code = EXIT_USAGE


class UnsafeArchiveError(InputError):
    """An archive member has an absolute path, ``..`` or is a link outside the root."""

    code = "unsafe_archive"


class PathNotAllowedError(InputError):
    """A server-side path is outside every configured root."""

    code = "path_not_allowed"
    http_status = 403


class UploadTooLargeError(InputError):
    """An upload exceeds the configured size limit."""

    code = "upload_too_large"
    http_status = 413


class EmptyAuditError(InputError):
    """An audit would check nothing (no readable test image, or a corpus with no indexed
    image); refused so that a gate never passes what it did not check (``--allow-empty``)."""

    code = "nothing_audited"


class NotFoundError(SplitauditError):
    """A named corpus, audit, match or item does not exist."""

    code = "not_found"
    http_status = 404
    exit_code = EXIT_USAGE


class SourceMissingError(NotFoundError):
    """The original bytes of an item cannot be read any more (moved, deleted, changed)."""

    code = "source_missing"


class ConflictError(SplitauditError):
    """The request contradicts stored state."""

    code = "conflict"
    http_status = 409
    exit_code = EXIT_USAGE


class ModelMismatchError(ConflictError):
    """A corpus is already indexed with another embedding model."""

    code = "model_mismatch"


class IndexMismatchError(SplitauditError):
    """A FAISS store's sidecar disagrees with the DB or with what was asked for."""

    code = "index_mismatch"


class IndexUnavailableError(SplitauditError):
    """The local index (``--home``) is missing: nothing to audit against."""

    code = "index_unavailable"


class ModelUnavailableError(SplitauditError):
    """Embedding weights cannot be loaded; the semantic tier must be skipped."""

    code = "model_unavailable"
    exit_code = EXIT_USAGE


class AuthError(SplitauditError):
    """Missing or wrong API token."""

    code = "unauthorized"
    http_status = 401
    exit_code = EXIT_USAGE


class PermissionDeniedError(AuthError):
    """A valid token whose role does not allow the request (a read-only token writing)."""

    code = "forbidden"
    http_status = 403


class ServerError(SplitauditError):
    """The audit server is unreachable or answered with an internal error."""

    code = "server_error"


class ImageDecodeError(SplitauditError):
    """One image cannot be decoded (corrupt, truncated, too large); recorded, never fatal."""

    code = "bad_image"
    http_status = 422
    exit_code = EXIT_USAGE
