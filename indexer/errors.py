"""The splitaudit exception tree.

    SplitauditError                 base of everything raised on purpose
    ├── UsageError                  bad arguments or options (CLI exit 2, HTTP 400)
    ├── InputError                  a source, split, manifest or archive cannot be used (exit 2, HTTP 400/422)
    │   ├── UnsafeArchiveError      an archive member escapes its root (absolute path, ``..``, link)
    │   ├── PathNotAllowedError     a server-side path lies outside the configured roots (HTTP 403)
    │   └── UploadTooLargeError     an upload exceeds the configured limit (HTTP 413)
    ├── NotFoundError               a corpus, audit, match or item does not exist (HTTP 404)
    ├── ConflictError               the request contradicts stored state, e.g. another model (HTTP 409)
    │   └── ModelMismatchError      a corpus is indexed with a different embedding model
    ├── IndexMismatchError          a FAISS store's sidecar disagrees with the DB or the request
    ├── IndexUnavailableError       the local index (--home) does not exist (CLI exit 3)
    ├── ModelUnavailableError       embedding weights cannot be loaded (semantic tier skipped)
    ├── AuthError                   missing or wrong API token (HTTP 401)
    └── ServerError                 the audit server is unreachable or failed (CLI exit 3)

Per-image problems (corrupt file, decompression bomb, ...) are *not* raised out of a
run: they are recorded as failed items with a reason (see ``ImageDecodeError``).
"""

from __future__ import annotations


class SplitauditError(Exception):
    """Base class; the message says what went wrong and what to do."""

    code = "error"


class UsageError(SplitauditError):
    """Bad command-line arguments or API parameters."""

    code = "bad_request"


class InputError(SplitauditError):
    """A source, split, manifest or archive cannot be used as given."""

    code = "bad_input"


class UnsafeArchiveError(InputError):
    """An archive member has an absolute path, ``..`` or is a link outside the root."""

    code = "unsafe_archive"


class PathNotAllowedError(InputError):
    """A server-side path is outside every configured root."""

    code = "path_not_allowed"


class UploadTooLargeError(InputError):
    """An upload exceeds the configured size limit."""

    code = "upload_too_large"


class NotFoundError(SplitauditError):
    """A named corpus, audit, match or item does not exist."""

    code = "not_found"


class ConflictError(SplitauditError):
    """The request contradicts stored state."""

    code = "conflict"


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


class AuthError(SplitauditError):
    """Missing or wrong API token."""

    code = "unauthorized"


class ServerError(SplitauditError):
    """The audit server is unreachable or answered with an internal error."""

    code = "server_error"


class ImageDecodeError(SplitauditError):
    """One image cannot be decoded (corrupt, truncated, too large); recorded, never fatal."""

    code = "bad_image"
