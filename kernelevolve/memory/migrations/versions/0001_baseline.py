"""The schema before migrations existed (kernelevolve up to commit b9e0bf2, tables made by
`Base.metadata.create_all`): a database made then is stamped with this revision, not re-created.

Written out column by column on purpose: the models change, this revision must not."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def _fk_node(*local: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["run_id", *local], ["nodes.run_id", "nodes.id"], ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("spec_name", sa.String(200), nullable=False),
        sa.Column("spec_path", sa.Text, nullable=False),
        sa.Column("spec_fingerprint", sa.String(64), nullable=False),
        sa.Column("spec_snapshot", sa.Text, nullable=False),
        sa.Column("family", sa.String(200), nullable=False),
        sa.Column("hardware", sa.String(100), nullable=False),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("device", sa.String(16), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("termination_reason", sa.String(32), nullable=True),
        sa.Column("rng_state", sa.JSON, nullable=True),
        sa.Column("policy_state", sa.JSON, nullable=True),
        sa.Column("elapsed_s", sa.Float, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "nodes",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("source", sa.Text, nullable=True),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "edges",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("child_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("parent_id", sa.Integer, nullable=False),
        _fk_node("child_id"),
        _fk_node("parent_id"),
    )
    op.create_table(
        "evaluations",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("node_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("result", sa.JSON, nullable=False),
        sa.Column("correct", sa.Boolean, nullable=False),
        sa.Column("fitness", sa.Float, nullable=True),
        sa.Column("failure", sa.String(32), nullable=True),
        sa.Column("device", sa.String(16), nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        _fk_node("node_id"),
    )
    op.create_table(
        "baseline_timings",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("spec_fingerprint", sa.String(64), nullable=False),
        sa.Column("shape", sa.String(400), nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("software", sa.String(200), nullable=False),
        sa.Column("baseline_ms", sa.Float, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("spec_fingerprint", "shape", "device", "software"),
    )
    op.create_table(
        "insights",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("node_id", sa.Integer, nullable=True),
        sa.Column("family", sa.String(200), nullable=False),
        sa.Column("hardware", sa.String(100), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_insights_family", "insights", ["family"])
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("node_id", sa.Integer, nullable=True),
        sa.Column("provider", sa.String(100), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("prompt_sha256", sa.String(64), nullable=False),
        sa.Column("reply", sa.Text, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("latency_s", sa.Float, nullable=False),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_llm_calls_run_id", "llm_calls", ["run_id"])
    op.create_index("ix_llm_calls_prompt_sha256", "llm_calls", ["prompt_sha256"])
    op.create_table(
        "reply_cache",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("reply", sa.Text, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("node_id", sa.Integer, nullable=False),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        _fk_node("node_id"),
    )
    op.create_index("ix_reviews_run_id", "reviews", ["run_id"])


def downgrade() -> None:
    for table in (
        "reviews",
        "reply_cache",
        "llm_calls",
        "insights",
        "baseline_timings",
        "evaluations",
        "edges",
        "nodes",
        "runs",
    ):
        op.drop_table(table)
