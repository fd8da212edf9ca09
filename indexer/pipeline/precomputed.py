"""Precomputed embeddings (clip-retrieval layout): the declared model, and vectors aligned with records.

Such a corpus is indexed without re-embedding: the model the vectors came from is declared by
the user (``--precomputed-model``) and recorded on the corpus. When the declaration is a model
spec this machine can load, its output dim is checked against the files and the same model
embeds test splits at audit time. When it cannot be loaded, an open_clip registry name still
has its dim checked from open_clip's bundled config; anything else is trusted as declared (and
audits report the semantic tier skipped until the weights are available).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from splitaudit.indexer.errors import ModelUnavailableError, UsageError
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from splitaudit.indexer.sources.record import Source

if TYPE_CHECKING:
    from splitaudit.indexer.embed.protocol import Embedder

log = logging.getLogger(__name__)

EmbedderLoader = Callable[[str], "Embedder"]


@dataclass(frozen=True, slots=True)
class DeclaredModel:
    """The model precomputed vectors were made with: its id, dim, and the spec to load it (if any)."""

    model_id: str
    dim: int
    spec: str | None
    verified: bool  # dim checked against the loaded model or its config


def is_precomputed(source: Source) -> bool:
    """Whether ``source`` brings its own embeddings."""
    return isinstance(source, PrecomputedEmbeddingSource)


def _default_loader(spec: str) -> Embedder:
    from splitaudit.indexer.embed.loader import load_embedder

    return load_embedder(spec)


def declare_model(
    declared: str, dim: int, *, loader: EmbedderLoader = _default_loader
) -> tuple[DeclaredModel, Embedder | None]:
    """Resolve ``--precomputed-model``; returns the declaration and the embedder if it loaded.

    Raises ``UsageError`` when the model is known to produce another dim than the files hold.
    """
    from splitaudit.indexer.embed.spec import parse_model_spec

    text = declared.strip()
    if not text:
        raise UsageError(
            "--precomputed-model is empty: name the model the embeddings were computed with"
        )
    try:
        parsed = parse_model_spec(text)
    except UsageError:
        log.warning(
            "precomputed model %r is not a loadable spec: recorded as given; audits will skip "
            "the semantic tier until a loadable spec is declared",
            text,
        )
        return DeclaredModel(model_id=text, dim=dim, spec=None, verified=False), None
    try:
        embedder = loader(text)
    except ModelUnavailableError as exc:
        log.warning(
            "cannot load %s to check the embeddings (%s); trusting the declaration", text, exc
        )
        model_id, verified = text, False
        if parsed.kind == "registry":
            model_id = (
                f"open_clip:{parsed.arch}:{parsed.pretrained}"  # what the loader would name it
            )
            config_dim = _registry_dim(str(parsed.arch))
            if config_dim is not None:
                _check_dim(text, config_dim, dim)
                verified = True
        return DeclaredModel(model_id=model_id, dim=dim, spec=text, verified=verified), None
    _check_dim(text, embedder.dim, dim)
    return DeclaredModel(model_id=embedder.model_id, dim=dim, spec=text, verified=True), embedder


def _registry_dim(arch: str) -> int | None:
    """Output dim of an open_clip architecture from its bundled config (no weights needed)."""
    try:
        import open_clip

        cfg = open_clip.get_model_config(arch)
    except Exception:  # open_clip missing or broken: nothing to check against
        return None
    return int(cfg["embed_dim"]) if cfg and "embed_dim" in cfg else None


def _check_dim(spec: str, model_dim: int, file_dim: int) -> None:
    if model_dim != file_dim:
        raise UsageError(
            f"the precomputed embeddings have dim {file_dim} but {spec} produces dim {model_dim}: "
            "declare the model they were computed with (--precomputed-model)"
        )
