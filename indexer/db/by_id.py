"""Columns of many rows looked up by primary key, through the DB-API cursor.

An audit or a dedup run reads a few columns (locators, digests, sizes, hashes) of every
candidate pair's items: ~200k ids per column at 1M corpus items. Through the ORM, in
statements of ``IN_CHUNK`` bound parameters, that cost 9-14 µs per id in a 1M dedup run (a
statement's compilation and row objects for a few hundred ids). Here the statement is
compiled once, the ids (integers, cast by ``int``: nothing else reaches the SQL text) are
inlined ``ID_CHUNK`` at a time (inlined values are not bound parameters, so SQLite's bound
parameter limit does not apply), and the rows come back as tuples, each value passed through
its column type's own result processor (JSON text parsed on SQLite; nothing on PostgreSQL,
whose driver parses it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

ID_CHUNK = 5_000  # ids per statement (~40 KB of SQL text)


def rows_by_id(
    session: Session,
    columns: Sequence[Any],
    ids: Iterable[int],
    *,
    where: Sequence[ColumnElement[bool]] = (),
) -> Iterator[tuple[Any, ...]]:
    """``(id, *values)`` for each row of the mapped ``columns``' table (e.g. ``Item.locator``)
    whose id is in ``ids`` and which satisfies every ``where`` clause, in no set order; ids
    with no row are left out. ``where`` is compiled with its values inlined: clauses the
    caller builds (``Item.phash.is_not(None)``), never user input."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return
    table = columns[0].class_
    conn = session.connection()
    dialect = conn.dialect
    key = table.id
    query = select(key, *columns)
    if where:
        query = query.where(*where)
    base = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    joiner = " AND " if where else " WHERE "
    id_sql = str(key.expression.compile(dialect=dialect))
    procs = [_processor(c, dialect) for c in columns]
    convert = any(p is not None for p in procs)
    cursor = conn.connection.cursor()
    try:
        for start in range(0, len(wanted), ID_CHUNK):
            chunk = ",".join(map(str, wanted[start : start + ID_CHUNK]))
            cursor.execute(f"{base}{joiner}{id_sql} IN ({chunk})")
            for row in cursor.fetchall():
                if convert:
                    yield (
                        row[0],
                        *(v if p is None else p(v) for p, v in zip(procs, row[1:], strict=True)),
                    )
                else:
                    yield tuple(row)
    finally:
        cursor.close()


def _processor(column: Any, dialect: Any) -> Callable[[Any], Any] | None:
    """The column type's result processor on ``dialect`` (None: values come back as they are)."""
    proc: Callable[[Any], Any] | None = column.type.dialect_impl(dialect).result_processor(
        dialect, None
    )
    return proc
