"""profiles: the profile summaries of a profiled node, as JSON, and their cost in seconds."""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("node_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("summaries", sa.JSON, nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.ForeignKeyConstraint(["run_id", "node_id"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("profiles")
