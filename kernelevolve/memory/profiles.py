"""Profile summaries per node: table `profiles`, one row per profiled node.

The row holds the node's ProfileSummary list (kernelevolve/profiling/schema.py) as JSON, one per
profiled case, and the seconds the profiles took; this module stores dicts and knows nothing of
the profiling package (the caller validates them back into the schema).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, Float, ForeignKeyConstraint, Integer, String, select
from sqlalchemy.orm import Mapped, mapped_column

from kernelevolve.memory.models import Base


class ProfileRow(Base):
    __tablename__ = "profiles"
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    node_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    summaries: Mapped[list[dict[str, Any]]] = mapped_column(JSON)  # [ProfileSummary.model_dump()]
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    __table_args__ = (ForeignKeyConstraint(["run_id", "node_id"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE"),)


def save_profile(repo, run_id: str, node_id: int, summaries: list[dict[str, Any]], seconds: float) -> None:
    """Insert or replace the node's profiles."""
    with repo.Session.begin() as s:
        row = s.get(ProfileRow, (run_id, node_id))
        if row is None:
            s.add(ProfileRow(run_id=run_id, node_id=node_id, summaries=summaries, seconds=seconds))
        else:
            row.summaries, row.seconds, row.created_at = summaries, seconds, time.time()


def load_profile(repo, run_id: str, node_id: int) -> ProfileRow | None:
    with repo.Session() as s:
        return s.get(ProfileRow, (run_id, node_id))


def load_profiles(repo, run_id: str) -> dict[int, ProfileRow]:
    with repo.Session() as s:
        return {r.node_id: r for r in s.scalars(select(ProfileRow).where(ProfileRow.run_id == run_id))}
