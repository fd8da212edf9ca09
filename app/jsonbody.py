"""The one way the API reads JSON it parses itself: bad or too deeply nested JSON is a 400."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from splitaudit.indexer.errors import UsageError


def parse_json(raw: bytes | str, *, what: str, example: str) -> Any:
    """``raw`` decoded as JSON; ``UsageError`` (HTTP 400) naming ``what`` and an ``example`` otherwise.

    Nesting beyond the parser's recursion limit (``[[[[...`` a hundred thousand deep) is a
    ``RecursionError`` inside ``json.loads``: it is a bad request like any other invalid JSON.
    """
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise UsageError(
            f"{what} is nested too deeply to be read as JSON; send an object such as {example}"
        ) from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        raise UsageError(
            f"{what} is not valid JSON ({reason}); send an object such as {example}"
        ) from exc


async def read_json_body(request: Request, *, example: str) -> Any:
    """The request body as JSON (its size is capped by ``BodyLimitMiddleware``)."""
    return parse_json(await request.body(), what="request body", example=example)
