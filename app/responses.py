"""Response classes that name their real media type, so OpenAPI documents text and image routes as such."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response


class CsvResponse(Response):
    """A CSV body (``text/csv``)."""

    media_type = "text/csv"


class TextResponse(Response):
    """A plain-text body (``text/plain``)."""

    media_type = "text/plain"


class ImageResponse(Response):
    """An image body (a JPEG or PNG thumbnail)."""

    media_type = "image/jpeg"


def also(*media_types: str, description: str = "Successful Response") -> dict[int | str, Any]:
    """``responses=`` documenting the other media types a 200 may carry."""
    return {200: {"description": description, "content": {t: {} for t in media_types}}}
