"""Bounded integer parameters shared by every route: ids (out of range -> 404) and pages (-> 422).

Ids are 32-bit ``INTEGER`` primary keys on SQLite and PostgreSQL alike; an id outside
``1..2**31-1`` can name no row, so it is answered as "not found" instead of reaching the
database (PostgreSQL refuses such a literal with ``integer out of range``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from fastapi.exceptions import RequestValidationError

from splitaudit.app.excerpt import excerpt

MAX_ID = 2**31 - 1
MAX_PAGE = 2**31 - 1
_RANGE_ERRORS = frozenset({"greater_than_equal", "less_than_equal"})

IdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="A row id (1 .. 2^31-1).")]
PageQuery = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page number, from 1.")]
PageSizeQuery = Annotated[int, Query(ge=1, le=500, description="Rows per page (1 .. 500).")]
PositionPath = Annotated[int, Path(ge=1, le=MAX_PAGE, description="Position in the queue, from 1.")]


def out_of_range_id(exc: RequestValidationError) -> str | None:
    """The message for a path id outside ``1..MAX_ID`` (a 404), or ``None`` for other errors."""
    errors: list[Any] = list(exc.errors())
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if len(loc) == 2 and loc[0] == "path" and err.get("type") in _RANGE_ERRORS:
            name = str(loc[1])
            what = name.removesuffix("_id").replace("_", " ")
            noun = f"{what} with id" if name.endswith("_id") else what
            return f"no {noun} {excerpt(err.get('input'), 40)}: ids and positions run from 1 to {MAX_ID}"
    return None
