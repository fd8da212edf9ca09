"""Parsing ``--model`` spec strings into ``ModelSpec`` values (nothing is loaded here)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from splitaudit.indexer.errors import UsageError

DEFAULT_MODEL_SPEC = "ViT-B-32:laion2b_s34b_b79k"
BUNDLED_MODEL_NAME = "efficientnet-lite0"

SpecKind = Literal["registry", "weights", "directory", "bundled"]

WEIGHTS_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")

_ARCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_WINDOWS_DRIVE_RE = re.compile(r"^[A-Za-z]:[\\/]")
_SPEC_HELP = (
    "use NAME:PRETRAINED_TAG (e.g. ViT-B-32:laion2b_s34b_b79k), NAME:/path/to/weights.pt, "
    "a directory holding open_clip_config.json + weights, or efficientnet-lite0"
)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: which kind of source, and its architecture / tag / path."""

    kind: SpecKind
    text: str
    arch: str | None = None
    pretrained: str | None = None
    path: Path | None = None


def canonical_tag(tag: str) -> str:
    """Normalise a pretrained tag the way open_clip looks tags up (lower case, ``-`` -> ``_``)."""
    return tag.lower().replace("-", "_")


def _looks_like_path(text: str) -> bool:
    """True when ``text`` is written as a filesystem path rather than a registry name."""
    return (
        "/" in text
        or "\\" in text
        or text.startswith((".", "~"))
        or bool(_WINDOWS_DRIVE_RE.match(text))
        or text.lower().endswith(WEIGHTS_SUFFIXES)
    )


def _path(text: str) -> Path:
    return Path(text).expanduser()


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse a model spec string; raise ``UsageError`` when it has no recognisable form."""
    text = spec.strip()
    if not text:
        raise UsageError(f"empty model spec: {_SPEC_HELP}")
    if text.lower() in (BUNDLED_MODEL_NAME, BUNDLED_MODEL_NAME.replace("-", "_")):
        return ModelSpec(kind="bundled", text=text, arch=BUNDLED_MODEL_NAME, pretrained="imagenet")
    if text.startswith("hf-hub:"):
        raise UsageError(
            f"model spec {spec!r}: hf-hub: specs are not supported (no model hub here); "
            "download the repository to a local directory and pass that directory"
        )
    if text.startswith("local-dir:"):
        location = text[len("local-dir:") :]
        if not location:
            raise UsageError(f"model spec {spec!r}: no directory after 'local-dir:'")
        return ModelSpec(kind="directory", text=text, path=_path(location))
    if _WINDOWS_DRIVE_RE.match(text) or ":" not in text:
        return _parse_without_tag(text, spec)
    arch, _, rest = text.partition(":")
    if not _ARCH_RE.match(arch):
        raise UsageError(f"model spec {spec!r}: {arch!r} is not an architecture name; {_SPEC_HELP}")
    if not rest:
        raise UsageError(f"model spec {spec!r}: nothing after ':'; {_SPEC_HELP}")
    if _looks_like_path(rest):
        return ModelSpec(kind="weights", text=text, arch=arch, path=_path(rest))
    if not _TAG_RE.match(rest):
        raise UsageError(f"model spec {spec!r}: {rest!r} is neither a pretrained tag nor a path")
    return ModelSpec(kind="registry", text=text, arch=arch, pretrained=canonical_tag(rest))


def _parse_without_tag(text: str, spec: str) -> ModelSpec:
    """A spec without ``NAME:`` is a checkpoint directory (a bare weights file needs its NAME)."""
    path = _path(text)
    if path.is_dir() or (_looks_like_path(text) and not text.lower().endswith(WEIGHTS_SUFFIXES)):
        return ModelSpec(kind="directory", text=text, path=path)
    if text.lower().endswith(WEIGHTS_SUFFIXES):
        raise UsageError(
            f"model spec {spec!r}: a weights file needs its open_clip architecture, "
            f"e.g. ViT-B-32:{text}"
        )
    raise UsageError(
        f"model spec {spec!r} names no pretrained weights (a bare architecture would have random "
        f"weights); {_SPEC_HELP}"
    )
