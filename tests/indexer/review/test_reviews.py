"""Reviews: listing matches with filters and paging, recording verdicts with history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from splitaudit.indexer.db.engine import make_engine, make_session_factory
from splitaudit.indexer.db.models import (
    Audit,
    Base,
    Corpus,
    Item,
    Job,
    Match,
    Review,
    Shard,
    Split,
    SplitItem,
)
from splitaudit.indexer.errors import NotFoundError, UsageError
from splitaudit.indexer.review.matches import list_matches, match_detail, review_history, set_review


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    Base.metadata.create_all(engine)
    with make_session_factory(engine)() as s:
        yield s
    engine.dispose()


def _seed(s: Session) -> dict[str, int]:
    """One audit with 4 matches over 3 test items (labels cat / dog), and a second audit."""
    corpus = Corpus(name="laion", generation=1)
    s.add(corpus)
    s.flush()
    shard = Shard(corpus_id=corpus.id, source="/data/laion", name="00000")
    s.add(shard)
    s.flush()
    items = [
        Item(
            corpus_id=corpus.id,
            shard_id=shard.id,
            key=f"c{i}.jpg",
            uri=f"/data/laion/c{i}.jpg",
            caption=f"a photo {i}",
            url=f"http://x/{i}.jpg",
            sha256=f"{i:064x}",
        )
        for i in range(3)
    ]
    split = Split(name="test")
    s.add_all([*items, split])
    s.flush()
    tests = [
        SplitItem(split_id=split.id, key=k, label=lab)
        for k, lab in (("cat/1.png", "cat"), ("cat/2.png", "cat"), ("dog/1.png", "dog"))
    ]
    job = Job(kind="audit", status="done")
    s.add_all([*tests, job])
    s.flush()
    audit = Audit(split_id=split.id, job_id=job.id, corpora=["laion"])
    other = Audit(split_id=split.id, corpora=["laion"])
    s.add_all([audit, other])
    s.flush()
    rows = [
        Match(
            audit_id=audit.id,
            split_item_id=tests[0].id,
            item_id=items[0].id,
            corpus="laion",
            kind="semantic",
            cosine=0.91,
            score=0.91,
        ),
        Match(
            audit_id=audit.id,
            split_item_id=tests[0].id,
            item_id=items[1].id,
            corpus="laion",
            kind="exact",
            hamming=0,
            score=1.0,
        ),
        Match(
            audit_id=audit.id,
            split_item_id=tests[1].id,
            item_id=items[2].id,
            corpus="laion",
            kind="near",
            hamming=4,
            cosine=0.97,
            score=0.97,
        ),
        Match(
            audit_id=audit.id,
            split_item_id=tests[2].id,
            item_id=None,
            corpus=None,
            kind="label_leak",
            evidence={"field": "path", "text": "dog"},
        ),
        Match(
            audit_id=other.id,
            split_item_id=tests[2].id,
            item_id=items[0].id,
            corpus="laion",
            kind="near",
            hamming=2,
            score=0.97,
        ),
    ]
    s.add_all(rows)
    s.flush()
    return {
        "audit": audit.id,
        "other": other.id,
        "semantic": rows[0].id,
        "exact": rows[1].id,
        "near": rows[2].id,
        "leak": rows[3].id,
        "item0": items[0].id,
    }


def test_lists_strongest_kind_first_with_provenance(session: Session) -> None:
    ids = _seed(session)
    items, total = list_matches(session, audit_id=ids["audit"])
    assert total == 4
    assert [m["kind"] for m in items] == ["exact", "near", "semantic", "label_leak"]
    semantic = items[2]
    assert semantic["id"] == ids["semantic"]
    assert semantic["split_item"]["key"] == "cat/1.png" and semantic["split_item"]["label"] == "cat"
    assert semantic["corpus_item"]["id"] == ids["item0"]
    assert semantic["corpus_key"] == "c0.jpg" and semantic["shard"] == "00000"
    assert semantic["corpus_item"]["caption"] == "a photo 0" and semantic["review"] is None
    assert items[3]["corpus_item"] is None and items[3]["evidence"] == {
        "field": "path",
        "text": "dog",
    }


def test_filters_by_kind_and_label_and_pages(session: Session) -> None:
    ids = _seed(session)
    near, total = list_matches(session, audit_id=ids["audit"], kind="near")
    assert total == 1 and near[0]["id"] == ids["near"]
    cats, total = list_matches(session, audit_id=ids["audit"], label="cat")
    assert total == 3 and {m["split_item"]["label"] for m in cats} == {"cat"}
    page2, total = list_matches(session, audit_id=ids["audit"], page=2, page_size=3)
    assert total == 4 and [m["kind"] for m in page2] == ["label_leak"]
    empty, total = list_matches(session, audit_id=ids["audit"], page=5, page_size=3)
    assert (empty, total) == ([], 4)


def test_review_filter_uses_the_newest_verdict(session: Session) -> None:
    ids = _seed(session)
    set_review(
        session,
        match_id=ids["exact"],
        verdict="not_duplicate",
        note="different frame",
        reviewer="ann",
    )
    set_review(
        session, match_id=ids["exact"], verdict="duplicate", note="same after all", reviewer="bob"
    )
    set_review(session, match_id=ids["near"], verdict="unsure", note=None, reviewer="ann")
    dup, total = list_matches(session, audit_id=ids["audit"], review="duplicate")
    assert total == 1 and dup[0]["id"] == ids["exact"]
    assert dup[0]["review"]["verdict"] == "duplicate" and dup[0]["review"]["reviewer"] == "bob"
    assert list_matches(session, audit_id=ids["audit"], review="not_duplicate") == ([], 0)
    _, reviewed = list_matches(session, audit_id=ids["audit"], review="reviewed")
    unreviewed, n_unreviewed = list_matches(session, audit_id=ids["audit"], review="unreviewed")
    assert (reviewed, n_unreviewed) == (2, 2)
    assert {m["id"] for m in unreviewed} == {ids["semantic"], ids["leak"]}


def test_set_review_keeps_history_newest_first(session: Session) -> None:
    ids = _seed(session)
    first = set_review(
        session, match_id=ids["near"], verdict="duplicate", note="n1", reviewer="ann"
    )
    second = set_review(
        session, match_id=ids["near"], verdict="not_duplicate", note="n2", reviewer="bob"
    )
    assert isinstance(second, Review) and second.id > first.id
    history = review_history(session, match_id=ids["near"])
    assert [(h["verdict"], h["note"], h["reviewer"]) for h in history] == [
        ("not_duplicate", "n2", "bob"),
        ("duplicate", "n1", "ann"),
    ]
    detail = match_detail(session, match_id=ids["near"])
    assert detail["review"]["verdict"] == "not_duplicate"
    assert len(detail["history"]) == 2 and detail["split_item"]["key"] == "cat/2.png"


def test_set_review_does_not_commit(session: Session) -> None:
    ids = _seed(session)
    session.commit()
    set_review(session, match_id=ids["near"], verdict="duplicate", note=None, reviewer=None)
    session.rollback()
    assert review_history(session, match_id=ids["near"]) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"kind": "fuzzy"}, UsageError, "unknown match kind 'fuzzy'"),
        ({"review": "maybe"}, UsageError, "unknown review filter 'maybe'"),
        ({"page": 0}, UsageError, "page must be 1 or more"),
        ({"page_size": 501}, UsageError, "page_size must be between 1 and 500"),
        ({"audit_id": 999}, NotFoundError, "audit 999 does not exist"),
    ],
)
def test_list_matches_bad_arguments(
    session: Session, kwargs: dict[str, object], error: type[Exception], text: str
) -> None:
    ids = _seed(session)
    args = {"audit_id": ids["audit"], **kwargs}
    with pytest.raises(error, match=text):
        list_matches(session, **args)  # type: ignore[arg-type]


def test_set_review_rejects_bad_verdict_and_unknown_match(session: Session) -> None:
    ids = _seed(session)
    with pytest.raises(UsageError, match="unknown verdict 'yes'"):
        set_review(session, match_id=ids["near"], verdict="yes", note=None, reviewer=None)
    with pytest.raises(NotFoundError, match="match 12345 does not exist"):
        set_review(session, match_id=12345, verdict="duplicate", note=None, reviewer=None)
    with pytest.raises(NotFoundError):
        review_history(session, match_id=12345)
