"""Items: thumbnails of corpus items and split items, read from their original bytes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from splitaudit.app.deps import ReaderDep, SessionDep, SettingsDep
from splitaudit.app.params import IdPath
from splitaudit.app.responses import ImageResponse, also
from splitaudit.app.thumbnails import read_original, render_thumbnail, thumbnail_etag
from splitaudit.indexer.db.models import Audit, Item, SplitItem
from splitaudit.indexer.errors import NotFoundError

router = APIRouter(tags=["items"])
SizeQuery = Annotated[int, Query(ge=16, le=1024, description="Longest side in pixels.")]


def _thumbnail(
    request: Request,
    item: Item | SplitItem,
    *,
    what: str,
    size: int,
    private: bool,
    allowed_roots: list[str] | None = None,
) -> Response:
    """``item``'s image at ``size`` px (304 when the caller's ETag still holds)."""
    locator = dict(item.locator or {})
    sha256, pixel_digest = item.sha256, item.pixel_digest
    etag = thumbnail_etag(sha256, locator, size)
    cache = f"{'private' if private else 'public'}, max-age=86400"
    headers = {"ETag": etag, "Cache-Control": cache}
    if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    data = read_original(
        locator,
        what=f"{what} ({item.key})",
        sha256=sha256,
        pixel_digest=pixel_digest,
        allowed_roots=allowed_roots,
    )
    thumb = render_thumbnail(data, size)
    return Response(thumb.data, media_type=thumb.media_type, headers=headers)


class ThumbnailAsk:
    """What every thumbnail request carries: the request (its ``If-None-Match``), the size, the cache scope."""

    def __init__(self, request: Request, settings: SettingsDep, size: SizeQuery = 256) -> None:
        """Read per request by FastAPI (``Depends()``)."""
        self.request, self.size, self.private = request, size, settings.read_requires_token

    def answer(
        self, item: Item | SplitItem, *, what: str, allowed_roots: list[str] | None = None
    ) -> Response:
        """``item``'s thumbnail, or 304 when the caller's copy is current."""
        return _thumbnail(
            self.request,
            item,
            what=what,
            size=self.size,
            private=self.private,
            allowed_roots=allowed_roots,
        )


ThumbnailDep = Annotated[ThumbnailAsk, Depends()]


@router.get("/items/{item_id}/thumbnail", response_class=ImageResponse, responses=also("image/png"))
def corpus_item_thumbnail(
    item_id: IdPath, session: SessionDep, ask: ThumbnailDep, _caller: ReaderDep
) -> Response:
    """A corpus item's image, downscaled to ``size`` px (404 ``source_missing`` when its bytes are gone)."""
    item = session.get(Item, item_id)
    if item is None:
        raise NotFoundError(f"corpus item {item_id} does not exist")
    return ask.answer(item, what=f"corpus item {item_id}")


@router.get(
    "/split-items/{item_id}/thumbnail", response_class=ImageResponse, responses=also("image/png")
)
def split_item_thumbnail(
    item_id: IdPath, session: SessionDep, ask: ThumbnailDep, _caller: ReaderDep
) -> Response:
    """A test split item's image, downscaled to ``size`` px (404 ``source_missing`` when its bytes are gone)."""
    item = session.get(SplitItem, item_id)
    if item is None:
        raise NotFoundError(f"split item {item_id} does not exist")
    return ask.answer(
        item,
        what=f"split item {item_id}",
        allowed_roots=split_allowed_roots(session, item.split_id),
    )


def split_allowed_roots(session: Session, split_id: int) -> list[str] | None:
    """The roots an API-submitted split was accepted under (``None`` for a split made by the CLI)."""
    for params in session.scalars(select(Audit.params).where(Audit.split_id == split_id)):
        roots = (params or {}).get("allowed_roots")
        if isinstance(roots, list):
            return [str(r) for r in roots]
    return None
