"""Usage rows keep every priced token class and whether the model's price was unknown (OBS-1).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TOKEN_COLUMNS = ("cache_write_tokens", "cache_write_1h_tokens", "reasoning_tokens")


def upgrade() -> None:
    with op.batch_alter_table("usage_log") as batch:
        for name in _TOKEN_COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("price_unknown", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("usage_log") as batch:
        for name in ("price_unknown", *reversed(_TOKEN_COLUMNS)):
            batch.drop_column(name)
