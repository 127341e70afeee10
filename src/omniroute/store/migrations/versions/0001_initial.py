"""Initial schema: every table of the store (STORE-1/2, PROV-3, API-8, COMBO-1/2, RESIL-4, AUTO-2, OBS-1/2).

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("allowed_models", sa.JSON(), nullable=False),
        sa.Column("budget_usd", sa.Float(), nullable=True),
        sa.Column("spent_usd", sa.Float(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_used_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
        sa.UniqueConstraint("name", name=op.f("uq_api_keys_name")),
    )
    op.create_table(
        "auto_exclusions",
        sa.Column("api_key_id", sa.String(), nullable=False),
        sa.Column("channel", sa.String(), nullable=False),
        sa.Column("candidate_key", sa.String(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("api_key_id", "channel", "candidate_key", name=op.f("pk_auto_exclusions")),
    )
    op.create_table(
        "combos",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("strategy", sa.String(), nullable=False),
        sa.Column("targets", sa.JSON(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("sort_order", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_combos")),
        sa.UniqueConstraint("name", name=op.f("uq_combos_name")),
    )
    op.create_table(
        "connections",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("provider", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("auth_type", sa.String(), nullable=False),
        sa.Column("api_key_enc", sa.Text(), nullable=True),
        sa.Column("access_token_enc", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("base_url", sa.String(), nullable=True),
        sa.Column("default_model", sa.String(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("account_tier", sa.String(), nullable=False),
        sa.Column("max_concurrent", sa.Integer(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("rate_limited_until", sa.Float(), nullable=True),
        sa.Column("backoff_level", sa.Integer(), nullable=False),
        sa.Column("test_status", sa.String(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_connections")),
    )
    op.create_index(op.f("ix_connections_provider"), "connections", ["provider"], unique=False)
    op.create_table(
        "fallback_chains",
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("entries", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("model", name=op.f("pk_fallback_chains")),
    )
    op.create_table(
        "provider_nodes",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("base_url", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provider_nodes")),
    )
    op.create_table(
        "responses_store",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("api_key_id", sa.String(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_responses_store")),
    )
    op.create_index(op.f("ix_responses_store_expires_at"), "responses_store", ["expires_at"], unique=False)
    op.create_table(
        "routing_decisions",
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_routing_decisions")),
    )
    op.create_index(op.f("ix_routing_decisions_ts"), "routing_decisions", ["ts"], unique=False)
    op.create_table(
        "usage_log",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("api_key_id", sa.String(), nullable=True),
        sa.Column("requested_model", sa.String(), nullable=False),
        sa.Column("provider", sa.String(), nullable=True),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("connection_id", sa.String(), nullable=True),
        sa.Column("strategy", sa.String(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("member", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_log")),
    )
    op.create_index(op.f("ix_usage_log_request_id"), "usage_log", ["request_id"], unique=False)
    op.create_index(op.f("ix_usage_log_ts"), "usage_log", ["ts"], unique=False)
    op.create_table(
        "model_combo_mappings",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("pattern", sa.String(), nullable=False),
        sa.Column("combo_id", sa.String(length=32), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["combo_id"],
            ["combos.id"],
            name=op.f("fk_model_combo_mappings_combo_id_combos"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_combo_mappings")),
    )
    op.create_index(
        op.f("ix_model_combo_mappings_combo_id"), "model_combo_mappings", ["combo_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_model_combo_mappings_combo_id"), table_name="model_combo_mappings")
    op.drop_table("model_combo_mappings")
    op.drop_index(op.f("ix_usage_log_ts"), table_name="usage_log")
    op.drop_index(op.f("ix_usage_log_request_id"), table_name="usage_log")
    op.drop_table("usage_log")
    op.drop_index(op.f("ix_routing_decisions_ts"), table_name="routing_decisions")
    op.drop_table("routing_decisions")
    op.drop_index(op.f("ix_responses_store_expires_at"), table_name="responses_store")
    op.drop_table("responses_store")
    op.drop_table("provider_nodes")
    op.drop_table("fallback_chains")
    op.drop_index(op.f("ix_connections_provider"), table_name="connections")
    op.drop_table("connections")
    op.drop_table("combos")
    op.drop_table("auto_exclusions")
    op.drop_table("api_keys")
