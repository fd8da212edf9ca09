"""Short excerpts of client input, so an error message never echoes a large request back."""

from __future__ import annotations

from typing import Any

EXCERPT_CHARS = 120
MAX_MESSAGE_CHARS = 2000


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """``repr``-free text of ``value`` cut to ``limit`` characters, saying how much was left out."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def clip_message(message: str) -> str:
    """An error message cut to ``MAX_MESSAGE_CHARS`` (the last line of defence for echoed input)."""
    return excerpt(message, MAX_MESSAGE_CHARS)
