"""CSV cells a spreadsheet will not run: the one CSV writer every CSV output goes through.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice and Google Sheets (CSV / formula injection). File names, labels,
captions and URLs come from the data being audited, so every text cell is neutralised the way
OWASP recommends: a single quote is put in front, which spreadsheets show as text. A cell that
already starts with a quote gets one more, so ``csv_unescape`` (used by the manifest reader,
which reads our clean-split CSV back as a split) restores every value exactly. Numbers are
written as they are (``-0.5`` is not a formula).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

# What makes a spreadsheet evaluate a cell (OWASP "CSV Injection"), plus the quote itself so
# the escape can be undone without loss.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_ESCAPED_STARTS = (*FORMULA_STARTS, "'")
_NEEDS_QUOTES = (",", '"', "\r", "\n")


def csv_safe(value: Any) -> Any:
    """``value`` as a CSV cell: ``None`` -> ``""``; text starting with a formula character gets a ``'``."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_ESCAPED_STARTS):
        return "'" + value
    return value


def csv_unescape(text: str) -> str:
    """The value ``csv_safe`` wrote as ``text`` (drops the one quote it added)."""
    if text.startswith("'") and text[1:].startswith(_ESCAPED_STARTS):
        return text[1:]
    return text


def csv_row(cells: Iterable[Any]) -> str:
    """One CSV line (``\\n``-terminated) of already-safe cells.

    Like ``csv.writer`` with minimal quoting, except that a carriage return inside a cell is
    quoted too (Python 3.11's writer leaves it bare when lines end in ``\\n``, which splits the row).
    """
    out = []
    for cell in cells:
        text = "" if cell is None else str(cell)
        if any(ch in text for ch in _NEEDS_QUOTES):
            text = '"' + text.replace('"', '""') + '"'
        out.append(text)
    return ",".join(out) + "\n"


def csv_lines(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[str], *, chunk: int = 0
) -> Iterator[str]:
    """CSV text of ``rows`` (header first, ``\\n`` line ends, cells through ``csv_safe``).

    With ``chunk`` > 0 the text comes in pieces of that many rows (for streaming responses);
    otherwise in one piece. Keys of a row that are not in ``columns`` are ignored.
    """
    parts = [csv_row(columns)]
    for n, row in enumerate(rows, 1):
        parts.append(csv_row(csv_safe(row.get(c)) for c in columns))
        if chunk and n % chunk == 0:
            yield "".join(parts)
            parts = []
    yield "".join(parts)


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """CSV text of ``rows`` in one string (see ``csv_lines``)."""
    return "".join(csv_lines(rows, columns))
