"""Shared fixtures: workspaces on tmp_path, synthetic photos, the tiny model, PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PG_URL = os.environ.get(
    "SPLITAUDIT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def photo(seed: int, size: tuple[int, int] = (320, 240)) -> Image.Image:
    """A deterministic photo-like RGB image: smooth gradients, blobs and texture."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        a, b, p = rng.uniform(-1, 1, 3)
        img[..., c] = 128 + 60 * np.sin(a * xx / w * 6 + b * yy / h * 6 + p * 6)
    for _ in range(6):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, min(w, h) / 3)
        color = rng.uniform(0, 255, 3)
        mask = ((xx - cx) ** 2 + (yy - cy) ** 2) < r**2
        img[mask] = 0.35 * img[mask] + 0.65 * color
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


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
