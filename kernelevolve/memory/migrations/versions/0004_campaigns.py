"""campaigns, campaign_problems: suites of problems searched or scored together."""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "campaign_problems",
        sa.Column("campaign_id", sa.String(32), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("shapes", sa.JSON, nullable=True),
        sa.Column("shape_rule", sa.String(200), nullable=False),
        sa.Column("solution", sa.Text, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"], ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("campaign_problems")
    op.drop_table("campaigns")
