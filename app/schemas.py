"""Pydantic models of request bodies and of the simpler responses (the HTTP boundary only)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    """The body of every error response's ``error`` member."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """Every error: ``{"error": {"code", "message"}}``."""

    error: ErrorDetail


class Health(BaseModel):
    """``GET /health``."""

    status: Literal["ok", "degraded"]
    version: str
    database: str
    worker: Literal["running", "stopped", "off"]


class JobAccepted(BaseModel):
    """A queued job (an audit, or a server-side index run)."""

    id: int
    status: str
    kind: str = "audit"
    job_id: int | None = None
    links: dict[str, str] = Field(default_factory=dict)


class CorpusCreate(_Strict):
    """``POST /corpora``: a new, empty corpus; its model is fixed by the first index run."""

    name: str = Field(min_length=1, max_length=200)
    model: str | None = Field(
        None, description="Embedding model spec (default: the server's default)."
    )
    no_embed: bool = Field(False, description="Hash-only corpus (no semantic tier).")
    sources: list[str] = Field(
        default_factory=list, description="Server paths to index right away."
    )


class SourcesCreate(_Strict):
    """``POST /corpora/{name}/sources``: index server-side paths (under a source root) as a job."""

    sources: list[str] = Field(min_length=1, max_length=1000)
    model: str | None = None
    no_embed: bool | None = None
    workers: int = Field(1, ge=1, le=64)


class AuditFromPaths(_Strict):
    """``POST /audits`` as JSON: a split already on the server, under a source root."""

    manifest: str | None = Field(None, description="Server path of a CSV/JSONL/Parquet manifest.")
    folder: str | None = Field(
        None, description="Server path of a split folder (ImageFolder or flat)."
    )
    corpus: list[str] = Field(min_length=1, description="Corpus names to audit against.")
    name: str | None = Field(None, max_length=500)
    labels: dict[str, str] | None = Field(
        None, description="key -> label, overriding the split's own."
    )
    label_names: dict[str, list[str] | str] | None = Field(
        None, description="label id -> names / synonyms for the label-leak tier."
    )
    thresholds: dict[str, Any] | None = None

    @field_validator("corpus", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_location(self) -> AuditFromPaths:
        if (self.manifest is None) == (self.folder is None):
            raise ValueError("give exactly one of 'manifest' or 'folder'")
        return self


class ReviewIn(_Strict):
    """``PUT /matches/{id}/review``."""

    verdict: Literal["duplicate", "not_duplicate", "unsure"]
    note: str | None = Field(None, max_length=10_000)


class ReviewOut(BaseModel):
    """A recorded verdict."""

    id: int
    match_id: int
    verdict: str
    note: str | None
    reviewer: str | None
    at: str | None
