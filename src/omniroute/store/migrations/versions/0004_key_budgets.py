"""API keys get budget periods, a reservation column, expiry, rate limits and ``updated_at`` (API-8).

``spent_usd`` becomes the spend of the period that started at ``period_start`` (epoch seconds, UTC
boundary of ``budget_period``); ``reserved_usd`` holds the estimates of calls in flight.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
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
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("budget_period", sa.String(), server_default="total", nullable=False))
        batch.add_column(sa.Column("period_start", sa.Float(), nullable=True))
        batch.add_column(sa.Column("reserved_usd", sa.Float(), server_default="0", nullable=False))
        batch.add_column(sa.Column("expires_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("rpm", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("tpm", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("updated_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        for name in (
            "updated_at",
            "tpm",
            "rpm",
            "expires_at",
            "reserved_usd",
            "period_start",
            "budget_period",
        ):
            batch.drop_column(name)
