"""Pydantic models of request bodies and responses (the report's own are in ``indexer/reporting/models.py``)."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from splitaudit.indexer.reporting.models import ReportMatch, ReviewInfo, Summary


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
    allow_empty: bool = Field(
        False,
        description="Let the audit finish when it checks nothing (an empty split, or a corpus "
        "with no indexed image); by default such an audit fails with the reason.",
    )
    image_column: str | None = Field(
        None, max_length=200, description="Hugging Face datasets: the image column's name."
    )
    key_column: str | None = Field(
        None,
        max_length=200,
        description="Hugging Face datasets: the column whose values key the rows (default: the "
        "dataset's own 'id' column when present, else FILE#ROW).",
    )

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


# ---------------------------------------------------------------- responses of the JSON GETs
# Open models (``extra="allow"``): they document and check the fields every client relies on,
# and pass through anything a newer server adds; routes dump them with ``exclude_unset``.


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


T = TypeVar("T")


class Page(_Open, Generic[T]):
    """One page of a list: ``items``, the ``total`` over all pages, ``page`` and ``page_size``."""

    items: list[T]
    total: int
    page: int
    page_size: int


class AuditSplit(_Open):
    """The split an audit read."""

    id: int
    name: str | None = None
    items: int | None = None


class AuditOut(_Open):
    """``GET /audits/{id}``: status, progress, summary and what the audit was run with."""

    id: int
    status: str
    progress: float
    message: str | None = None
    error: str | None = None
    attempts: int = 0
    job_id: int | None = None
    split: AuditSplit
    corpora: list[str] = Field(default_factory=list)
    thresholds: dict[str, Any] = Field(default_factory=dict)
    summary: Summary | None = None
    model: dict[str, Any] | None = None
    code_version: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    links: dict[str, str] = Field(default_factory=dict)


class SplitItemOut(_Open):
    """The test-side image of a match."""

    id: int
    key: str
    label: str | None = None
    uri: str | None = None
    caption: str | None = None
    sha256: str | None = None
    pixel_digest: str | None = None
    width: int | None = None
    height: int | None = None
    error: str | None = None


class CorpusItemOut(_Open):
    """The corpus-side image of a match, with its provenance."""

    id: int
    key: str
    uri: str | None = None
    url: str | None = None
    caption: str | None = None
    label: str | None = None
    license: str | None = None
    shard: str | None = None
    sha256: str | None = None
    width: int | None = None
    height: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MatchOut(ReportMatch):
    """A match as the matches API lists it: the report's match, its audit and both images."""

    audit_id: int
    split_item: SplitItemOut
    corpus_item: CorpusItemOut | None = None


class ReviewEntry(ReviewInfo):
    """One recorded verdict of a match's history."""

    id: int


class MatchDetail(MatchOut):
    """``GET /matches/{id}``: a match with its review history, newest first."""

    history: list[ReviewEntry] = Field(default_factory=list)


class JobOut(_Open):
    """A background job (audit, index or dedup run)."""

    id: int
    kind: str
    status: str
    progress: float
    message: str | None = None
    error: str | None = None
    attempts: int = 0
    params: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    audit_id: int | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None


class DedupRunOut(_Open):
    """``GET /dedup/{id}``: a dedup run's status, parameters and summary (``splitaudit.dedup/v1``)."""

    schema_: str = Field(alias="schema")
    dedup_id: int
    corpus: str
    status: str
    progress: float
    message: str | None = None
    error: str | None = None
    keep: str | None = None
    semantic: bool = False
    thresholds: dict[str, Any] | None = None
    generation: int | None = None
    code_version: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    summary: dict[str, Any] | None = None


class DedupMemberOut(_Open):
    """One member of a duplicate cluster."""

    item_id: int
    key: str
    uri: str | None = None
    url: str | None = None
    shard: str | None = None
    width: int | None = None
    height: int | None = None
    kept: bool
    tier: str | None = None
    partner_key: str | None = None
    hamming: int | None = None
    cosine: float | None = None
    verify: float | None = None
    review: str | None = None


class DedupClusterOut(_Open):
    """A duplicate cluster: its members, the kept one first."""

    id: int
    semantic: bool
    members: list[DedupMemberOut]
    size: int
    tier: str | None = None
    kept: str | None = None


class MemberReviewOut(_Open):
    """A recorded verdict on a dedup cluster member."""

    run_id: int
    item_id: int
    cluster: int
    verdict: str
    note: str | None = None
    reviewer: str | None = None
    pairs: int
    at: str | None = None


class CorpusModel(_Open):
    """The embedding model a corpus was indexed with (``id`` and ``dim`` once indexed)."""

    id: str | None = None
    spec: str | None = None
    dim: int | None = None


class CorpusOut(_Open):
    """A corpus: name, model, index generation and item counts."""

    id: int
    name: str
    model: CorpusModel
    generation: int
    counts: dict[str, int] = Field(default_factory=dict)
    created_at: str | None = None
    updated_at: str | None = None
    job_id: int | None = None  # ``POST /corpora`` with sources: the index job it queued


class CorpusList(_Open):
    """``GET /corpora``: every corpus, by name."""

    items: list[CorpusOut]
    total: int


class FailedCorpusItem(_Open):
    """A corpus item that could not be indexed, and why."""

    id: int
    key: str | None = None
    uri: str | None = None
    shard: str | None = None
    reason: str | None = None
    at: str | None = None


class CorpusDetail(CorpusOut):
    """``GET /corpora/{name}``: a corpus with its saved index, shards and a page of failed items."""

    index: dict[str, Any] = Field(default_factory=dict)
    shards: dict[str, int] = Field(default_factory=dict)
    failed: Page[FailedCorpusItem]
