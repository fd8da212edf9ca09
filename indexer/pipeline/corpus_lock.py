"""One indexing run per corpus at a time: a lock held for the whole run, across processes.

SQLite homes use an advisory file lock (``HOME/locks/corpus-NAME.lock``, ``flock``): the
kernel drops it when its process dies, so a killed run never leaves a stale lock. The file
records who holds it, for the message the second run gets. PostgreSQL deployments (several
hosts) use a session advisory lock held on a dedicated connection.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from sqlalchemy import text

from splitaudit.indexer.errors import ConflictError
from splitaudit.indexer.workspace import Workspace, check_corpus_name

log = logging.getLogger(__name__)

LOCKS_DIR = "locks"


class CorpusBusyError(ConflictError):
    """Another process is indexing the same corpus right now."""

    code = "corpus_busy"


def _busy(name: str, holder: str) -> CorpusBusyError:
    return CorpusBusyError(
        f"corpus {name!r} is being indexed by another process ({holder}); wait for it to finish "
        "and run this command again (it resumes: nothing already indexed is redone)"
    )


def _holder_text(raw: str) -> str:
    try:
        info: dict[str, Any] = json.loads(raw)
    except ValueError:
        return "holder unknown"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info.get("since", 0))))
    return f"pid {info.get('pid')} on {info.get('host')}, since {since}"


@contextmanager
def _file_lock(ws: Workspace, name: str) -> Iterator[None]:
    import fcntl

    folder = ws.home / LOCKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"corpus-{check_corpus_name(name)}.lock"
    fh: IO[str] = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held for the run)
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            raise _busy(name, _holder_text(fh.read())) from None
        fh.seek(0)
        fh.truncate()
        fh.write(
            json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
        )
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fh.flush()
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    finally:
        fh.close()


def _advisory_key(name: str) -> int:
    digest = hashlib.blake2b(f"splitaudit:corpus:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def _pg_lock(ws: Workspace, name: str) -> Iterator[None]:
    key = _advisory_key(name)
    with ws.engine.connect() as conn:
        got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
        conn.commit()
        if not got:
            raise _busy(name, "a PostgreSQL session holds its lock")
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()


@contextmanager
def corpus_index_lock(ws: Workspace, name: str) -> Iterator[None]:
    """Hold the indexing lock of corpus ``name``; ``CorpusBusyError`` (exit 2, HTTP 409) if taken."""
    if ws.engine.dialect.name == "postgresql":
        with _pg_lock(ws, name):
            yield
        return
    try:
        import fcntl  # noqa: F401  (POSIX only)
    except ImportError:  # pragma: no cover - Windows: one process per home is the user's job
        yield
        return
    with _file_lock(ws, name):
        yield
