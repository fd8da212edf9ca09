"""SQLAlchemy 2.0 typed models of the provenance DB (the schema changes only through Alembic)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONDict = dict[str, Any]


def utcnow() -> datetime:
    """Timezone-aware now, for default timestamps."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base with the naming convention Alembic relies on."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {JSONDict: JSON, datetime: DateTime(timezone=True)}  # noqa: RUF012


class Corpus(Base):
    """A named reference corpus; its embedding model is fixed by the first indexing run."""

    __tablename__ = "corpus"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    model_id: Mapped[str | None] = mapped_column(String(300))
    # The spec the model was loaded from (open_clip NAME:TAG, checkpoint path, efficientnet-lite0).
    model_spec: Mapped[str | None] = mapped_column(Text)
    embed_dim: Mapped[int | None] = mapped_column(Integer)
    # Bumped on every committed indexing batch; FAISS sidecars record the generation they hold.
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    shards: Mapped[list[Shard]] = relationship(
        back_populates="corpus", cascade="all, delete-orphan"
    )


class Shard(Base):
    """A resumable unit of indexing work (a tar shard, a folder subtree, a manifest chunk)."""

    __tablename__ = "shard"
    __table_args__ = (UniqueConstraint("corpus_id", "source", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpus.id", ondelete="CASCADE"), index=True)
    source: Mapped[str] = mapped_column(String(2000))
    name: Mapped[str] = mapped_column(String(2000))
    fingerprint: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending|running|done
    item_count: Mapped[int] = mapped_column(Integer, default=0)
    failed_count: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    corpus: Mapped[Corpus] = relationship(back_populates="shards")


class Item(Base):
    """One indexed corpus image; ``id`` is also its id in the corpus FAISS indexes."""

    __tablename__ = "item"
    __table_args__ = (
        UniqueConstraint("shard_id", "key"),
        Index("ix_item_corpus_sha256", "corpus_id", "sha256"),
        Index("ix_item_corpus_pixel_digest", "corpus_id", "pixel_digest"),
        Index("ix_item_corpus_stream_digest", "corpus_id", "stream_digest"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpus.id", ondelete="CASCADE"), index=True)
    shard_id: Mapped[int] = mapped_column(ForeignKey("shard.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(2000))
    uri: Mapped[str] = mapped_column(Text, default="")
    locator: Mapped[JSONDict] = mapped_column(default=dict)
    url: Mapped[str | None] = mapped_column(Text)
    sha256: Mapped[str | None] = mapped_column(String(64))
    pixel_digest: Mapped[str | None] = mapped_column(String(64))
    stream_digest: Mapped[str | None] = mapped_column(String(64))  # JPEG coded data, no metadata
    # 64-bit hashes stored as signed int64 (two's complement of the unsigned value).
    phash: Mapped[int | None] = mapped_column(BigInteger)
    dhash: Mapped[int | None] = mapped_column(BigInteger)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    format: Mapped[str | None] = mapped_column(String(20))
    # a thumbnail's shape descriptor (``features.shape``: short side under its MAX_SIDE px)
    shape: Mapped[bytes | None] = mapped_column(LargeBinary)
    caption: Mapped[str | None] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(String(500))
    license: Mapped[str | None] = mapped_column(String(500))
    meta: Mapped[JSONDict] = mapped_column("metadata", default=dict)
    has_embedding: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class FailedItem(Base):
    """A corpus record that could not be indexed, with the reason."""

    __tablename__ = "failed_item"
    __table_args__ = (UniqueConstraint("shard_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpus.id", ondelete="CASCADE"), index=True)
    shard_id: Mapped[int] = mapped_column(ForeignKey("shard.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(2000))
    uri: Mapped[str] = mapped_column(Text, default="")
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class VectorBatch(Base):
    """A committed file of embeddings (``vectors/<name>.npy``) for items of one corpus.

    The row is inserted in the same transaction as its items, so a file without a row is
    an orphan of a killed run and is ignored (and deleted).
    """

    __tablename__ = "vector_batch"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpus.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Split(Base):
    """A downstream test split submitted for audit."""

    __tablename__ = "split"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(500))
    root: Mapped[str] = mapped_column(Text, default="")
    # What ``open_split`` re-opens to read the items (folder, manifest or archive path).
    source: Mapped[str] = mapped_column(Text, default="")
    # Labels given apart from the split's own layout (``--labels`` / ``labels`` upload): key -> label.
    labels: Mapped[JSONDict] = mapped_column(default=dict)
    ingested: Mapped[bool] = mapped_column(Boolean, default=False)
    item_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SplitItem(Base):
    """One image of a split, with its features (``error`` set when it could not be read)."""

    __tablename__ = "split_item"
    __table_args__ = (UniqueConstraint("split_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    split_id: Mapped[int] = mapped_column(ForeignKey("split.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(2000))
    uri: Mapped[str] = mapped_column(Text, default="")
    locator: Mapped[JSONDict] = mapped_column(default=dict)
    label: Mapped[str | None] = mapped_column(String(500))
    caption: Mapped[str | None] = mapped_column(Text)
    sha256: Mapped[str | None] = mapped_column(String(64))
    pixel_digest: Mapped[str | None] = mapped_column(String(64))
    stream_digest: Mapped[str | None] = mapped_column(String(64))  # JPEG coded data, no metadata
    phash: Mapped[int | None] = mapped_column(BigInteger)
    phash_mirror: Mapped[int | None] = mapped_column(BigInteger)
    dhash: Mapped[int | None] = mapped_column(BigInteger)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    meta: Mapped[JSONDict] = mapped_column("metadata", default=dict)
    error: Mapped[str | None] = mapped_column(Text)


class Job(Base):
    """A unit of background work (an audit or a server-side index run) with a lease."""

    __tablename__ = "job"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))  # audit|index
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    params: Mapped[JSONDict] = mapped_column(default=dict)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()


class Audit(Base):
    """An audit of one split against one or more corpora; its job runs it."""

    __tablename__ = "audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    split_id: Mapped[int] = mapped_column(ForeignKey("split.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("job.id", ondelete="SET NULL"))
    corpora: Mapped[list[str]] = mapped_column(JSON, default=list)
    thresholds: Mapped[JSONDict] = mapped_column(default=dict)
    params: Mapped[JSONDict] = mapped_column(default=dict)
    summary: Mapped[JSONDict] = mapped_column(default=dict)
    model: Mapped[JSONDict] = mapped_column(default=dict)
    index_info: Mapped[JSONDict] = mapped_column(default=dict)
    code_version: Mapped[str] = mapped_column(String(50), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column()


class Match(Base):
    """A finding for one split item: a corpus item it duplicates, or a label leak."""

    __tablename__ = "match"
    __table_args__ = (Index("ix_match_audit_kind", "audit_id", "kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_id: Mapped[int] = mapped_column(ForeignKey("audit.id", ondelete="CASCADE"), index=True)
    split_item_id: Mapped[int] = mapped_column(
        ForeignKey("split_item.id", ondelete="CASCADE"), index=True
    )
    # NULL for a self label-leak (the test item's own metadata gives its label away).
    item_id: Mapped[int | None] = mapped_column(
        ForeignKey("item.id", ondelete="SET NULL"), index=True
    )
    corpus: Mapped[str | None] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # exact|near|semantic|label_leak
    cosine: Mapped[float | None] = mapped_column(Float)
    hamming: Mapped[int | None] = mapped_column(Integer)
    score: Mapped[float | None] = mapped_column(Float)
    evidence: Mapped[JSONDict] = mapped_column(default=dict)


class SplitDuplicate(Base):
    """Two items of the same split that duplicate each other."""

    __tablename__ = "split_duplicate"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_id: Mapped[int] = mapped_column(ForeignKey("audit.id", ondelete="CASCADE"), index=True)
    a_id: Mapped[int] = mapped_column(ForeignKey("split_item.id", ondelete="CASCADE"))
    b_id: Mapped[int] = mapped_column(ForeignKey("split_item.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    cosine: Mapped[float | None] = mapped_column(Float)
    hamming: Mapped[int | None] = mapped_column(Integer)


class Review(Base):
    """A reviewer's verdict on a match; history is kept, the newest row is current."""

    __tablename__ = "review"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    match_id: Mapped[int] = mapped_column(ForeignKey("match.id", ondelete="CASCADE"), index=True)
    verdict: Mapped[str] = mapped_column(String(20))  # duplicate|not_duplicate|unsure
    note: Mapped[str | None] = mapped_column(Text)
    reviewer: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DedupRun(Base):
    """A deduplication of one corpus against itself; its job runs it, chunk by chunk (resumable)."""

    __tablename__ = "dedup_run"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpus.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("job.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(String(20), default="queued")  # queued|running|done|failed
    params: Mapped[JSONDict] = mapped_column(default=dict)
    thresholds: Mapped[JSONDict] = mapped_column(default=dict)
    # Corpus generation the edges were found at, and how many chunks of it are done.
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    chunks_done: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[JSONDict] = mapped_column(default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    code_version: Mapped[str] = mapped_column(String(50), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column()


class DedupEdge(Base):
    """A duplicate pair (``a_id < b_id``) found by a dedup run, with its evidence."""

    __tablename__ = "dedup_edge"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("dedup_run.id", ondelete="CASCADE"), index=True)
    a_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    b_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    kind: Mapped[str] = mapped_column(String(20))  # exact|near|semantic
    hamming: Mapped[int | None] = mapped_column(Integer)
    cosine: Mapped[float | None] = mapped_column(Float)
    verify: Mapped[float | None] = mapped_column(Float)


class DedupMember(Base):
    """One corpus item of a duplicate cluster of a finished dedup run."""

    __tablename__ = "dedup_member"
    __table_args__ = (Index("ix_dedup_member_run_cluster", "run_id", "cluster"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("dedup_run.id", ondelete="CASCADE"), index=True)
    cluster: Mapped[int] = mapped_column(Integer)
    semantic: Mapped[bool] = mapped_column(Boolean, default=False)  # a --semantic cluster
    item_id: Mapped[int] = mapped_column(ForeignKey("item.id", ondelete="CASCADE"))
    kept: Mapped[bool] = mapped_column(Boolean, default=False)
    tier: Mapped[str | None] = mapped_column(String(20))
    partner_id: Mapped[int | None] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    hamming: Mapped[int | None] = mapped_column(Integer)
    cosine: Mapped[float | None] = mapped_column(Float)
    verify: Mapped[float | None] = mapped_column(Float)


class DedupReview(Base):
    """A reviewer's verdict on a pair of corpus items (``a_id < b_id``); the newest row is current."""

    __tablename__ = "dedup_review"
    __table_args__ = (Index("ix_dedup_review_pair", "corpus_id", "a_id", "b_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpus.id", ondelete="CASCADE"), index=True)
    a_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    b_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    # The member the reviewer judged (one of a_id / b_id); its pairs with the others share the verdict.
    subject_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    verdict: Mapped[str] = mapped_column(String(20))  # duplicate|not_duplicate|unsure
    note: Mapped[str | None] = mapped_column(Text)
    reviewer: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
