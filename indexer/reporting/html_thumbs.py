"""Thumbnails of a report's flagged pairs, embedded as data URIs for the self-contained HTML report."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.orm import Session

from splitaudit.indexer.errors import NotFoundError, SplitauditError
from splitaudit.indexer.reporting.models import ReportItem, ReportMatch

THUMB_PX = 160
# Enough to judge a pair by eye; keeps a 500-pair page near 6 MB (see bench/html_report.py).
THUMB_QUALITY = 75
Side = Literal["split", "corpus"]
# (side, item id) -> small encoded image bytes (JPEG, or PNG with transparency).
ThumbnailFetcher = Callable[[Side, int], bytes]


@dataclass(frozen=True, slots=True)
class EmbeddedImage:
    """A thumbnail as a ``data:`` URI, or why there is none (the HTML shows the reason)."""

    uri: str | None
    reason: str | None = None


def data_uri(data: bytes) -> str:
    """``data:image/jpeg;base64,...`` (or ``image/png``, sniffed from the bytes)."""
    media = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{media};base64,{base64.b64encode(data).decode('ascii')}"


def pair_item_ids(pairs: Iterable[tuple[ReportItem, ReportMatch]]) -> list[tuple[Side, int]]:
    """The distinct (side, id) of the test and corpus items of ``(item, match)`` pairs, in order."""
    seen: dict[tuple[Side, int], None] = {}
    for item, match in pairs:
        if item.split_item_id is not None:
            seen[("split", item.split_item_id)] = None
        if match.corpus_item_id is not None:
            seen[("corpus", match.corpus_item_id)] = None
    return list(seen)


def embed_thumbnails(
    ids: Iterable[tuple[Side, int]], fetch: ThumbnailFetcher
) -> dict[tuple[Side, int], EmbeddedImage]:
    """Fetch and embed each thumbnail once; an unreadable one keeps its reason instead."""
    out: dict[tuple[Side, int], EmbeddedImage] = {}
    for key in ids:
        try:
            out[key] = EmbeddedImage(data_uri(fetch(*key)))
        except SplitauditError as exc:
            out[key] = EmbeddedImage(None, str(exc))
    return out


def db_thumbnail_fetcher(session: Session, *, size: int = THUMB_PX) -> ThumbnailFetcher:
    """Thumbnails read from the items' original bytes, found through their locators in the DB."""
    from splitaudit.indexer.db.models import Item, SplitItem
    from splitaudit.indexer.thumbnails import read_original, render_thumbnail

    def fetch(side: Side, item_id: int) -> bytes:
        row: SplitItem | Item | None = (
            session.get(SplitItem, item_id) if side == "split" else session.get(Item, item_id)
        )
        what = f"{'split' if side == 'split' else 'corpus'} item {item_id}"
        if row is None:
            raise NotFoundError(f"{what} does not exist")
        data = read_original(
            dict(row.locator or {}),
            what=f"{what} ({row.key})",
            sha256=row.sha256,
            pixel_digest=row.pixel_digest,
        )
        return render_thumbnail(data, size, quality=THUMB_QUALITY).data

    return fetch
