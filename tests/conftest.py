"""Shared fixtures: workspaces on tmp_path, synthetic photos, the tiny model, PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from splitaudit.indexer.demo import synthetic_photo

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PG_URL = os.environ.get(
    "SPLITAUDIT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def photo(seed: int, size: tuple[int, int] = (320, 240)) -> Image.Image:
    """A deterministic photo-like RGB image (see ``splitaudit.indexer.demo.synthetic_photo``)."""
    return synthetic_photo(seed, size)


@pytest.fixture
def make_photo() -> object:
    """The ``photo(seed, size)`` factory."""
    return photo


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh splitaudit home folder."""
    return tmp_path / "home"


@pytest.fixture(scope="session")
def tiny_model_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny seeded open_clip checkpoint saved on disk; returns the spec that loads it."""
    from helpers.tiny_model import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-model"), seed=0)


def _pg_available() -> str | None:
    try:
        import psycopg

        dsn = PG_URL.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as exc:  # any failure means: skip with the reason
        return f"no PostgreSQL at {PG_URL}: {type(exc).__name__}: {exc}".splitlines()[0]


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A clean PostgreSQL schema for one test (skips with the reason when no server answers)."""
    reason = _pg_available()
    if reason:
        pytest.skip(reason)
    import uuid

    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    dsn = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
