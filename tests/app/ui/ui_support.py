"""Helpers for the UI page tests: a migrated DB template, an app client, a seeded audit with every tier."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from conftest import photo
from helpers.app_home import app_client
from helpers.app_home import new_home as new_home  # re-exported for the tests

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import (
    Audit,
    Corpus,
    FailedItem,
    Item,
    Job,
    Match,
    Review,
    Shard,
    Split,
    SplitDuplicate,
    SplitItem,
)
from splitaudit.indexer.workspace import Workspace

THRESHOLDS = {
    "phash_hamming": 8,
    "near_cosine": 0.95,
    "semantic_cosine": 0.85,
    "candidate_hamming": 20,
    "candidate_cosine": 0.75,
    "verify_score": 0.8,
}
EXTRA_NEAR = 60  # near pairs on label "dog", so the queue pages


ui_client = app_client


def jpeg(seed: int, size: tuple[int, int] = (96, 72)) -> bytes:
    """A small deterministic JPEG."""
    out = io.BytesIO()
    photo(seed, size).save(out, format="JPEG", quality=90)
    return out.getvalue()


def sha(data: bytes) -> str:
    """Hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Seeded:
    """Ids of the seeded rows."""

    audit: int
    running_audit: int
    matches: dict[str, int]
    split_items: dict[str, int]
    items: dict[str, int]
    pair_total: int


def _leak_evidence() -> dict[str, Any]:
    caption = "a tabby cat <b>on</b> a sofa"
    start = caption.index("cat")
    return {
        "type": "match",
        "via": "near",
        "hit_count": 1,
        "hits": [
            {
                "field": "caption",
                "term": "cat",
                "label": "cat",
                "start": start,
                "end": start + 3,
                "before": caption[:start],
                "match": "cat",
                "after": caption[start + 3 :],
                "context": caption[:start] + "[[cat]]" + caption[start + 3 :],
            }
        ],
    }


def seed(home: Path, files: Path) -> Seeded:
    """A done audit with exact, near, semantic and label-leak pairs, reviews and failures; plus a running one."""
    files.mkdir(parents=True, exist_ok=True)
    data = {
        name: jpeg(i)
        for i, name in enumerate(("c_exact", "c_near", "c_sem", "t_cat", "t_dog", "t_bird"))
    }
    for name, blob in data.items():
        (files / f"{name}.jpg").write_bytes(blob)
    ws = Workspace.open(home, migrate=False)
    try:
        with transaction(ws.sessions) as s:
            corpus = Corpus(
                name="web", generation=3, model_id="tiny-model", model_spec="/m.pt", embed_dim=16
            )
            s.add(corpus)
            s.flush()
            shard = Shard(
                corpus_id=corpus.id, source=str(files), name="00000", status="done", item_count=4
            )
            s.add(shard)
            s.flush()

            def item(key: str, name: str | None, **kw: Any) -> Item:
                path = files / f"{name}.jpg" if name else files / "gone.jpg"
                return Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key=key,
                    uri=str(path),
                    locator={"kind": "file", "path": str(path)},
                    sha256=sha(data[name]) if name else "ab" * 32,
                    **kw,
                )

            items = {
                "exact": item(
                    "000001.jpg",
                    "c_exact",
                    caption="a cat on a mat",
                    label="cat",
                    license="CC-BY-4.0",
                    url="https://example.org/img/000001.jpg",
                ),
                "near": item(
                    "000002.jpg",
                    "c_near",
                    caption="a tabby cat <b>on</b> a sofa",
                    license="CC0",
                    url="https://example.org/img/000002.jpg",
                    meta={"source_page": "https://example.org/p/2"},
                ),
                "sem": item("000003.jpg", "c_sem", caption="a dog in a park"),
                "gone": item("000004.jpg", None, caption="moved away"),
            }
            s.add_all(items.values())
            s.add(
                FailedItem(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="broken.jpg",
                    uri=str(files / "broken.jpg"),
                    reason="cannot identify image file (truncated JPEG)",
                )
            )
            split = Split(name="pets-test", item_count=4 + EXTRA_NEAR)
            s.add(split)
            s.flush()

            def test_item(key: str, label: str | None, name: str | None, **kw: Any) -> SplitItem:
                path = files / f"{name}.jpg" if name else files / "missing-test.jpg"
                return SplitItem(
                    split_id=split.id,
                    key=key,
                    label=label,
                    uri=str(path),
                    locator={"kind": "file", "path": str(path)},
                    sha256=sha(data[name]) if name else "cd" * 32,
                    pixel_digest="ef" * 32,
                    **kw,
                )

            tests = {
                "cat": test_item("cat/1.jpg", "cat", "t_cat", width=96, height=72),
                "dog": test_item("dog/1.jpg", "dog", "t_dog"),
                "bird": test_item("bird/1.jpg", "bird", "t_bird"),
                "bad": SplitItem(
                    split_id=split.id,
                    key="bird/broken.jpg",
                    label="bird",
                    error="cannot decode: truncated file",
                ),
            }
            extra = [test_item(f"dog/x{i:03d}.jpg", "dog", None) for i in range(EXTRA_NEAR)]
            s.add_all([*tests.values(), *extra])
            done_job = Job(kind="audit", status="done", progress=1.0)
            run_job = Job(
                kind="audit", status="running", progress=0.4, message="read 4 split images"
            )
            s.add_all([done_job, run_job])
            s.flush()
            summary = {
                "items": 4 + EXTRA_NEAR,
                "readable": 3 + EXTRA_NEAR,
                "failed": 1,
                "flagged": 2 + EXTRA_NEAR,
                "flagged_rate": 0.9683,
                "contaminated": 2 + EXTRA_NEAR,
                "contaminated_rate": 0.9683,
                "by_kind": {"exact": 1, "near": 1 + EXTRA_NEAR, "semantic": 1, "label_leak": 1},
                "by_label": {
                    "bird": {
                        "items": 1,
                        "flagged": 0,
                        "rate": 0.0,
                        "by_kind": {"exact": 0, "near": 0, "semantic": 0, "label_leak": 0},
                    },
                    "cat": {
                        "items": 1,
                        "flagged": 1,
                        "rate": 1.0,
                        "by_kind": {"exact": 1, "near": 1, "semantic": 0, "label_leak": 1},
                    },
                    "dog": {
                        "items": 1 + EXTRA_NEAR,
                        "flagged": 1 + EXTRA_NEAR,
                        "rate": 1.0,
                        "by_kind": {"exact": 0, "near": EXTRA_NEAR, "semantic": 1, "label_leak": 0},
                    },
                },
                "split_duplicates": 1,
                "label_prevalence": {"web": {"cat": 2, "dog": 1, "bird": 0}},
            }
            audit = Audit(
                split_id=split.id,
                job_id=done_job.id,
                corpora=["web"],
                thresholds=THRESHOLDS,
                summary=summary,
                code_version="0.1.0",
                model={"id": "tiny-model", "semantic": "ok", "reason": None},
                index_info={
                    "web": {
                        "corpus": "web",
                        "generation": 3,
                        "hash_count": 4,
                        "hash_index": "BinaryFlat",
                        "vector_count": 4,
                        "vector_index": "Flat",
                        "model_id": "tiny-model",
                        "dim": 16,
                    }
                },
            )
            running = Audit(
                split_id=split.id, job_id=run_job.id, corpora=["web"], thresholds=THRESHOLDS
            )
            s.add_all([audit, running])
            s.flush()
            matches = {
                "exact": Match(
                    audit_id=audit.id,
                    split_item_id=tests["cat"].id,
                    item_id=items["exact"].id,
                    corpus="web",
                    kind="exact",
                    hamming=0,
                    cosine=0.999,
                    score=1.0,
                    evidence={"sha256_equal": True, "phash_hamming": 0},
                ),
                "near": Match(
                    audit_id=audit.id,
                    split_item_id=tests["cat"].id,
                    item_id=items["near"].id,
                    corpus="web",
                    kind="near",
                    hamming=6,
                    cosine=0.97,
                    score=0.97,
                    evidence={
                        "phash_hamming": 6,
                        "mirrored": True,
                        "cosine": 0.97,
                        "shape_cosine": 0.91,
                    },
                ),
                "semantic": Match(
                    audit_id=audit.id,
                    split_item_id=tests["dog"].id,
                    item_id=items["sem"].id,
                    corpus="web",
                    kind="semantic",
                    cosine=0.88,
                    score=0.88,
                    evidence={"cosine": 0.88},
                ),
                "leak": Match(
                    audit_id=audit.id,
                    split_item_id=tests["cat"].id,
                    item_id=items["near"].id,
                    corpus="web",
                    kind="label_leak",
                    evidence=_leak_evidence(),
                ),
            }
            extra_matches = [
                Match(
                    audit_id=audit.id,
                    split_item_id=t.id,
                    item_id=items["gone"].id,
                    corpus="web",
                    kind="near",
                    hamming=3 + i % 5,
                    score=0.9 - i / 1000,
                    evidence={"phash_hamming": 3 + i % 5},
                )
                for i, t in enumerate(extra)
            ]
            s.add_all([*matches.values(), *extra_matches])
            s.flush()
            s.add(
                Review(
                    match_id=matches["exact"].id,
                    verdict="unsure",
                    note="first look",
                    reviewer="alice",
                )
            )
            s.flush()
            s.add(
                Review(
                    match_id=matches["exact"].id,
                    verdict="duplicate",
                    note="same photo",
                    reviewer="bob",
                )
            )
            s.add(
                SplitDuplicate(
                    audit_id=audit.id,
                    a_id=tests["cat"].id,
                    b_id=tests["dog"].id,
                    kind="near",
                    hamming=4,
                    cosine=None,
                )
            )
            s.flush()
            return Seeded(
                audit=audit.id,
                running_audit=running.id,
                matches={k: m.id for k, m in matches.items()},
                split_items={k: t.id for k, t in tests.items()},
                items={k: i.id for k, i in items.items()},
                pair_total=len(matches) + EXTRA_NEAR,
            )
    finally:
        ws.close()


VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


@dataclass
class Node:
    """An element of a parsed page: tag, attributes, children and text."""

    tag: str
    attrs: dict[str, str]
    children: list[Node]
    parts: list[str]

    @property
    def text(self) -> str:
        """All text inside, whitespace collapsed."""
        return " ".join(" ".join(self._texts()).split())

    def _texts(self) -> Iterator[str]:
        yield from self.parts
        for child in self.children:
            yield from child._texts()

    def iter(self) -> Iterator[Node]:
        """This node and every descendant, in document order."""
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str | bool) -> list[Node]:
        """Descendants with ``tag`` whose attributes match (``True``: present; ``class_``: has the class)."""
        out = []
        for node in self.iter():
            if node is self or (tag is not None and node.tag != tag):
                continue
            if all(_attr_matches(node, key, value) for key, value in attrs.items()):
                out.append(node)
        return out

    def one(self, tag: str | None = None, **attrs: str | bool) -> Node:
        """The only descendant matching (fails the test otherwise)."""
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"expected one <{tag} {attrs}>, found {len(found)}"
        return found[0]

    def by_id(self, element_id: str) -> Node:
        """The element with ``id``."""
        return self.one(id=element_id)


def _attr_matches(node: Node, key: str, value: str | bool) -> bool:
    name = key.rstrip("_").replace("_", "-")
    if name == "class" and isinstance(value, str):
        return value in node.attrs.get("class", "").split()
    if value is True:
        return name in node.attrs
    return node.attrs.get(name) == value


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, [], [])
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v if v is not None else "" for k, v in attrs}, [], [])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(html: str) -> Node:
    """The page as a tree of ``Node``."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root
