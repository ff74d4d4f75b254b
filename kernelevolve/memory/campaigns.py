"""Campaigns: one search (or one scored solution file) per problem of a suite.

Table `campaigns` holds what the campaign was started with; table `campaign_problems` one row per
problem, in order, with the shapes it is evaluated at and, once started, the run that holds its
nodes. A problem's row is written before its run starts and gets the run's id as soon as the run
exists, so a campaign killed at any instant resumes: finished runs stay, unfinished ones resume,
problems without a run start. This module stores rows only; kernelevolve/campaign/ runs them.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import JSON, Float, ForeignKeyConstraint, Integer, String, Text, select, update
from sqlalchemy.orm import Mapped, mapped_column

from kernelevolve.memory.models import Base

# A problem's state: waiting for its run, its run exists (searching or cut off), finished, or not
# searched at all (skipped: the offline operator has no reference kernel; no solution file), or
# ended by an error of its own (its spec changed, its run could not be built): the note says which.
PENDING, STARTED, DONE, SKIPPED, ERROR = "pending", "started", "done", "skipped", "error"


class CampaignRow(Base):
    __tablename__ = "campaigns"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # search | solutions
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # model, budget, policy, device, baseline, paths...
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | finished
    owner: Mapped[str] = mapped_column(String(200), default="")  # host:pid of the last process on it
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    updated_at: Mapped[float] = mapped_column(Float, default=time.time)


class CampaignProblemRow(Base):
    __tablename__ = "campaign_problems"
    campaign_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(200))
    path: Mapped[str] = mapped_column(Text)  # the spec or problem file
    shapes: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)  # None: the spec's own
    shape_rule: Mapped[str] = mapped_column(String(200), default="")  # where the shapes came from
    solution: Mapped[str | None] = mapped_column(Text, nullable=True)  # solutions campaigns: the file scored
    state: Mapped[str] = mapped_column(String(16), default=PENDING)
    note: Mapped[str] = mapped_column(Text, default="")  # why skipped
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    __table_args__ = (ForeignKeyConstraint(["campaign_id"], ["campaigns.id"], ondelete="CASCADE"),)


def create_campaign(repo, kind: str, settings: dict[str, Any], problems: list[dict[str, Any]], owner: str) -> str:
    """Write the campaign and its problems (each a dict of CampaignProblemRow's fields); its id."""
    with repo.Session.begin() as s:
        campaign_id = "c-" + secrets.token_hex(4)
        while s.get(CampaignRow, campaign_id) is not None:
            campaign_id = "c-" + secrets.token_hex(4)
        s.add(CampaignRow(id=campaign_id, kind=kind, settings=settings, owner=owner))
        s.flush()
        for i, p in enumerate(problems):
            s.add(CampaignProblemRow(campaign_id=campaign_id, position=i, **p))
    return campaign_id


def campaign(repo, campaign_id: str) -> CampaignRow | None:
    with repo.Session() as s:
        return s.get(CampaignRow, campaign_id)


def campaigns(repo) -> list[CampaignRow]:
    with repo.Session() as s:
        return list(s.scalars(select(CampaignRow).order_by(CampaignRow.created_at.desc())))


def problems(repo, campaign_id: str) -> list[CampaignProblemRow]:
    with repo.Session() as s:
        return list(
            s.scalars(
                select(CampaignProblemRow)
                .where(CampaignProblemRow.campaign_id == campaign_id)
                .order_by(CampaignProblemRow.position)
            )
        )


def update_campaign(repo, campaign_id: str, **fields) -> None:
    with repo.Session.begin() as s:
        s.execute(update(CampaignRow).where(CampaignRow.id == campaign_id).values(updated_at=time.time(), **fields))


def update_problem(repo, campaign_id: str, position: int, **fields) -> None:
    with repo.Session.begin() as s:
        s.execute(
            update(CampaignProblemRow)
            .where(CampaignProblemRow.campaign_id == campaign_id, CampaignProblemRow.position == position)
            .values(**fields)
        )
