"""Open_clip weights on the Hugging Face hub: where they live, the local cache, first-use download.

Registry specs (``NAME:TAG``) resolve through open_clip's pretrained table to a hub repository
and file. Cached weights load without any request; missing ones download once into the
standard Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``) with huggingface_hub's progress
bar. Without a hub (``HF_HUB_OFFLINE=1``, or no answer within ``HUB_TIMEOUT_S``) the caller
gets a ``ModelUnavailableError`` in seconds that says how to pre-fetch the weights.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import ModelUnavailableError

logger = logging.getLogger(__name__)

# Seconds to wait for the hub's metadata answer: a reachable hub answers in well under a
# second, an unreachable one must fail fast (huggingface_hub's own default is 10 s per file).
HUB_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HubWeights:
    """Where a pretrained tag's weights live on the hub: repository and candidate file names.

    ``filenames`` is open_clip's own preference order (a ``.safetensors`` twin first).
    """

    repo_id: str
    filenames: tuple[str, ...]

    @property
    def filename(self) -> str:
        """The file named by open_clip's pretrained table (the last candidate)."""
        return self.filenames[-1]


def hub_weights(cfg: dict[str, Any]) -> HubWeights | None:
    """The hub location of an open_clip pretrained config (None for URL- or file-only tags)."""
    hub = cfg.get("hf_hub", "")
    if not hub:
        return None
    from open_clip.constants import HF_SAFE_WEIGHTS_NAME, HF_WEIGHTS_NAME

    # same split as open_clip.pretrained.download_pretrained: "org/repo/" or "org/repo/file"
    repo_id, filename = os.path.split(hub)
    filename = filename or HF_WEIGHTS_NAME
    names = [filename]
    if filename == HF_WEIGHTS_NAME:
        names.insert(0, HF_SAFE_WEIGHTS_NAME)
    elif filename.endswith((".bin", ".pth")):
        names.insert(0, filename[:-4] + ".safetensors")
    return HubWeights(repo_id=repo_id, filenames=tuple(names))


def cached_weights(cfg: dict[str, Any]) -> Path | None:
    """The local file open_clip would load for this pretrained config without a download."""
    if "file" in cfg:
        path = Path(cfg["file"])
        return path if path.is_file() else None
    location = hub_weights(cfg)
    if location is not None:
        from huggingface_hub import try_to_load_from_cache

        for name in location.filenames:
            found = try_to_load_from_cache(location.repo_id, name)
            if isinstance(found, str):
                return Path(found)
        return None
    url = cfg.get("url", "")
    path = Path("~/.cache/clip").expanduser() / os.path.basename(url)
    return path if url and path.is_file() else None


def hub_offline() -> bool:
    """Whether huggingface_hub is in offline mode (``HF_HUB_OFFLINE=1`` when it was imported)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_cache_dir() -> str:
    """The Hugging Face hub cache folder in use (``HF_HUB_CACHE``, default ``$HF_HOME/hub``)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def prefetch_help(spec: str, cfg: dict[str, Any]) -> str:
    """How to get these weights onto a machine without a hub (appended to offline errors)."""
    location = hub_weights(cfg)
    how = [f"on a machine with internet access run `splitaudit models pull {spec}`"]
    if location is not None:
        how.append(f"or `huggingface-cli download {location.repo_id} {location.filename}`")
    return (
        f"to pre-fetch the weights, {' '.join(how)}, then copy its Hugging Face cache folder here "
        f"and point HF_HOME at it (this run looks in {hub_cache_dir()})"
    )


def download_weights(spec: str, cfg: dict[str, Any]) -> Path:
    """Download a pretrained tag's weights into the Hugging Face cache; return the local file.

    Raises ``ModelUnavailableError`` within ~``HUB_TIMEOUT_S`` seconds when the hub cannot be
    reached (or offline mode is on), naming how to pre-fetch the weights.
    """
    location = hub_weights(cfg)
    if location is None:
        raise ModelUnavailableError(
            f"weights for {spec} are published at a URL, not on the Hugging Face hub; "
            "download them and pass NAME:/path/to/weights.pt"
        )
    unreachable = (
        f"weights for {spec} could not be loaded: they are not in the local model cache and the "
        "model hub is not reachable"
    )
    if hub_offline():
        raise ModelUnavailableError(
            f"{unreachable} (HF_HUB_OFFLINE is set); {prefetch_help(spec, cfg)}"
        )
    from huggingface_hub import hf_hub_download

    name = _first_published(spec, cfg, location, unreachable)
    logger.info("downloading %s/%s into %s", location.repo_id, name, hub_cache_dir())
    try:
        return Path(
            hf_hub_download(
                location.repo_id, name, etag_timeout=HUB_TIMEOUT_S, library_name="splitaudit"
            )
        )
    except Exception as exc:  # HTTP errors, a broken transfer, a full disk
        raise ModelUnavailableError(
            f"weights for {spec} could not be downloaded from {location.repo_id}: {exc}; "
            f"{prefetch_help(spec, cfg)}"
        ) from exc


def _first_published(spec: str, cfg: dict[str, Any], location: HubWeights, unreachable: str) -> str:
    """The first candidate file the hub has, asked once each with a short timeout and no retry.

    huggingface_hub itself retries a failed metadata request for 60 s before giving up, so
    reachability is settled here first.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

    missing: list[str] = []
    for name in location.filenames:
        try:
            get_hf_file_metadata(hf_hub_url(location.repo_id, name), timeout=HUB_TIMEOUT_S)
            return name
        except EntryNotFoundError:
            missing.append(name)
        except HfHubHTTPError as exc:  # reachable, but refused (gated, private, server error)
            raise ModelUnavailableError(
                f"weights for {spec} could not be downloaded from {location.repo_id}: {exc}; "
                f"{prefetch_help(spec, cfg)}"
            ) from exc
        except Exception as exc:  # no route, refused connection, timeout, proxy, TLS
            raise ModelUnavailableError(
                f"{unreachable} ({type(exc).__name__}: {exc}); {prefetch_help(spec, cfg)}"
            ) from exc
    raise ModelUnavailableError(
        f"the hub repository {location.repo_id} has none of {', '.join(missing)}; check the "
        f"pretrained tag of {spec}"
    )
