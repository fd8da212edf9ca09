"""Shape descriptors of thumbnail corpus items (issue 23: small copies' candidates)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05 16:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("item", sa.Column("shape", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("item") as batch:
        batch.drop_column("shape")
