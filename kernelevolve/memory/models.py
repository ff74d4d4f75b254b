"""The experiment database schema (SQLAlchemy 2 ORM): runs, nodes, edges, evaluations,
baseline timings, insights, LLM calls and reviews. Works on SQLite and PostgreSQL alike.

A change here needs a revision in kernelevolve/memory/migrations/versions/ (see its __init__)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, ForeignKeyConstraint, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}


def _now() -> float:
    return time.time()


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    spec_name: Mapped[str] = mapped_column(String(200))
    spec_path: Mapped[str] = mapped_column(Text)
    spec_fingerprint: Mapped[str] = mapped_column(String(64))
    spec_snapshot: Mapped[str] = mapped_column(Text)  # the YAML (or reference module) as it was
    family: Mapped[str] = mapped_column(String(200), default="")
    hardware: Mapped[str] = mapped_column(String(100), default="")
    policy: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(16))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # shapes, limits, policy options, model...
    status: Mapped[str] = mapped_column(String(16), default="running")
    termination_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    rng_state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    policy_state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)  # search time over all sessions
    owner: Mapped[str] = mapped_column(String(200), default="")  # host:pid of the last process on it
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    updated_at: Mapped[float] = mapped_column(Float, default=_now)


class NodeRow(Base):
    __tablename__ = "nodes"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    source: Mapped[str | None] = mapped_column(Text, nullable=True)
    note: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(16), default="pending")
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class EdgeRow(Base):
    __tablename__ = "edges"
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    child_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # parent order
    parent_id: Mapped[int] = mapped_column(Integer)
    __table_args__ = (
        ForeignKeyConstraint(["run_id", "child_id"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE"),
        ForeignKeyConstraint(["run_id", "parent_id"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE"),
    )


class EvaluationRow(Base):
    __tablename__ = "evaluations"
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    node_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)  # EvalResult.to_dict()
    correct: Mapped[bool] = mapped_column(Boolean)
    fitness: Mapped[float | None] = mapped_column(Float, nullable=True)
    failure: Mapped[str | None] = mapped_column(String(32), nullable=True)
    device: Mapped[str] = mapped_column(String(16))
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    __table_args__ = (ForeignKeyConstraint(["run_id", "node_id"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE"),)


class BaselineRow(Base):
    """Reference latencies as evaluations reported them, per spec, shape, device and software."""

    __tablename__ = "baseline_timings"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    spec_fingerprint: Mapped[str] = mapped_column(String(64))
    shape: Mapped[str] = mapped_column(String(400))
    device: Mapped[str] = mapped_column(String(200))  # the GPU name where known
    software: Mapped[str] = mapped_column(String(200))  # torch / triton versions
    baseline_ms: Mapped[float] = mapped_column(Float)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    __table_args__ = (UniqueConstraint("spec_fingerprint", "shape", "device", "software"),)


class InsightRow(Base):
    __tablename__ = "insights"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    node_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    family: Mapped[str] = mapped_column(String(200), default="", index=True)
    hardware: Mapped[str] = mapped_column(String(100), default="")
    text: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class LLMCallRow(Base):
    __tablename__ = "llm_calls"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    node_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    provider: Mapped[str] = mapped_column(String(100))
    model: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    prompt_sha256: Mapped[str] = mapped_column(String(64), index=True)
    reply: Mapped[str] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # requests the call took
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class ReplyCacheRow(Base):
    """The opt-in LLM reply cache (`run --reply-cache`): the `position`-th reply to one cache key
    (sha256 over provider, model, endpoint, temperature, reply limit, system prompt, prompt)."""

    __tablename__ = "reply_cache"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    reply: Mapped[str] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class ReviewRow(Base):
    __tablename__ = "reviews"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), index=True)
    node_id: Mapped[int] = mapped_column(Integer)
    reviewer: Mapped[str] = mapped_column(String(200))
    verdict: Mapped[str] = mapped_column(String(32))
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    __table_args__ = (ForeignKeyConstraint(["run_id", "node_id"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE"),)
