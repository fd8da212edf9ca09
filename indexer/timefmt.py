"""Timestamps as ISO 8601 UTC text (SQLite hands stored times back without a zone)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(value: datetime | None) -> str | None:
    """``value`` as ISO 8601 with an explicit UTC offset; ``None`` stays ``None``."""
    if value is None:
        return None
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return aware.isoformat()
