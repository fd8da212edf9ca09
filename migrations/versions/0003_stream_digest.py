"""JPEG stream digest on corpus and split items (issue 13: decode at need)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 03:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("item", sa.Column("stream_digest", sa.String(length=64), nullable=True))
    op.create_index(
        "ix_item_corpus_stream_digest", "item", ["corpus_id", "stream_digest"], unique=False
    )
    op.add_column("split_item", sa.Column("stream_digest", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("split_item") as batch:
        batch.drop_column("stream_digest")
    op.drop_index("ix_item_corpus_stream_digest", table_name="item")
    with op.batch_alter_table("item") as batch:
        batch.drop_column("stream_digest")
