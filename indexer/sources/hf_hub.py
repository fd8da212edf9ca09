"""``hf://datasets/OWNER/NAME[@REV][/PATH]``: a dataset repo resolved to local files via ``huggingface_hub``.

Files come from the hub's cache (downloaded there on first use); with ``HF_HUB_OFFLINE=1``
(or ``offline=True``) only the cache is used, so a cached dataset works without a network.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.extras import HF_HUB_MODULES, require_extra

HF_SCHEME = "hf:/"
# Path.__new__ folds "hf://" into "hf:/": accept both spellings.
_HF_URI = re.compile(
    r"^hf:/{1,2}datasets/(?P<owner>[^/@]+)/(?P<name>[^/@]+)(?:@(?P<rev>[^/]+))?(?:/(?P<path>.*))?$"
)
# Files a dataset source reads (and the metadata next to them); the rest of a repo is not fetched.
DATA_PATTERNS = ("*.parquet", "*.arrow", "*.json")


def is_hf_uri(spec: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` is an ``hf://`` address."""
    return os.fspath(spec).startswith(HF_SCHEME)


def hf_uri_text(spec: str | os.PathLike[str]) -> str:
    """``spec`` as users write it: ``hf://...`` even when a ``Path`` folded it into ``hf:/...``."""
    text = os.fspath(spec)
    return "hf://" + text[len(HF_SCHEME) :].lstrip("/") if is_hf_uri(text) else text


@dataclass(frozen=True, slots=True)
class HFDatasetRef:
    """A dataset repo, a revision (branch, tag or commit; ``None`` = main) and a path inside it."""

    repo_id: str
    revision: str | None
    path: str

    @staticmethod
    def parse(spec: str | os.PathLike[str]) -> HFDatasetRef:
        """Parse ``hf://datasets/OWNER/NAME[@REV][/PATH]``; ``InputError`` for another shape."""
        text = hf_uri_text(spec)
        match = _HF_URI.match(text)
        if match is None:
            raise InputError(
                f"{text}: expected hf://datasets/OWNER/NAME[@REVISION][/PATH], "
                "e.g. hf://datasets/uoft-cs/cifar10/plain_text/test-*.parquet"
            )
        path = (match.group("path") or "").strip("/")
        if ".." in path.split("/"):
            raise InputError(f"{text}: '..' is not allowed in the path inside the repo")
        return HFDatasetRef(
            f"{match.group('owner')}/{match.group('name')}", match.group("rev"), path
        )


def resolve_hf_uri(
    spec: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
) -> str:
    """The local path (or glob) of ``spec``'s files in the hub cache, downloading what is missing.

    ``cache_dir`` defaults to the hub's (``HF_HUB_CACHE``); ``offline`` to ``HF_HUB_OFFLINE``.
    """
    ref = HFDatasetRef.parse(spec)
    spec = hf_uri_text(spec)  # the messages below show it with its two slashes
    require_extra("hf", HF_HUB_MODULES, f"reading {spec}")
    from huggingface_hub import snapshot_download  # lazy: imports httpx and more
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    patterns = list(DATA_PATTERNS) if not ref.path else [ref.path, f"{ref.path}/*"]
    try:
        # local_files_only=False still honours HF_HUB_OFFLINE (huggingface_hub reads it itself).
        snapshot = snapshot_download(
            ref.repo_id,
            repo_type="dataset",
            revision=ref.revision,
            allow_patterns=patterns,
            cache_dir=None if cache_dir is None else os.fspath(cache_dir),
            local_files_only=bool(offline),
        )
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:
        raise InputError(
            f"{spec}: dataset {ref.repo_id} (revision {ref.revision or 'main'}) is not in the Hugging Face "
            "cache and the hub cannot be reached: run once with network access (or `hf download "
            f"{ref.repo_id} --repo-type dataset`), or point at a local copy"
        ) from exc
    except HfHubHTTPError as exc:
        raise InputError(
            f"{spec}: the Hugging Face hub refused the request ({exc}); check the "
            "repo name and revision, and HF_TOKEN for private or gated datasets"
        ) from exc
    except OSError as exc:
        raise InputError(f"{spec}: cannot read the Hugging Face cache ({exc})") from exc
    local = os.path.join(snapshot, *ref.path.split("/")) if ref.path else snapshot
    if not any(c in ref.path for c in "*?[") and not os.path.exists(local):
        raise InputError(
            f"{spec}: no file or folder {ref.path!r} in {ref.repo_id} "
            f"at revision {ref.revision or 'main'}"
        )
    return local
