"""The experiment database: one Repository per URL (SQLite file by default, PostgreSQL for teams).

Crash safety rests on two transactions per node: the node (source, parents, state "pending") is
written before it is evaluated, and its evaluation is written together with the policy state and
the run's random state after. Whatever instant a process dies at, the database holds a graph the
search can continue from. Every method opens its own session, so threads may share a Repository.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Iterable

from sqlalchemy import Integer, create_engine, delete, event, func, or_, select, update
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from kernelevolve.records.baselines import BaselineKey
from kernelevolve.records.result import EvalResult
from kernelevolve.memory import migrations
from kernelevolve.memory.models import (
    BaselineRow,
    EdgeRow,
    EvaluationRow,
    InsightRow,
    LLMCallRow,
    NodeRow,
    ReplyCacheRow,
    ReviewRow,
    RunRow,
)
from kernelevolve.records.calls import LLMCallRecord
from kernelevolve.records.graph import EVALUATED, Node, SearchGraph

DEFAULT_URL = "sqlite:///kernelevolve.db"
ENV_VAR = "KERNELEVOLVE_DB"


class DatabaseError(ValueError):
    """The database cannot be used (bad URL, missing driver, unreachable server); one line."""


def database_url(url: str | None = None) -> str:
    """--db, else $KERNELEVOLVE_DB, else a SQLite file in the current directory."""
    from kernelevolve.settings import settings

    return url or settings().db or DEFAULT_URL


def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


def new_run_id() -> str:
    return "r-" + secrets.token_hex(4)


class Repository:
    def __init__(self, url: str | None = None) -> None:
        self.url = database_url(url)
        try:
            self.engine = _make_engine(self.url)
            migrations.upgrade(self.engine)
        except migrations.SchemaError as e:
            raise DatabaseError(f"cannot use the database {self.display_url}: {e}") from None
        except (ArgumentError, NoSuchModuleError, ValueError) as e:
            raise DatabaseError(f"--db {self.url!r}: not a usable SQLAlchemy URL ({_first_line(e)})") from None
        except (OperationalError, SQLAlchemyError) as e:
            why = _sqlite_unwritable(self.url) or _first_line(getattr(e, "orig", None) or e)
            raise DatabaseError(f"cannot open the database {self.display_url}: {why}") from None
        self.Session = sessionmaker(self.engine, expire_on_commit=False)

    def check_writable(self) -> None:
        """DatabaseError (one line) when this process cannot write the database: a SQLite file that
        is read-only or immutable, or in a folder it cannot write (SQLite keeps its journal beside
        the file). Commands that write call it before they spend anything; reading needs none."""
        why = _sqlite_unwritable(self.url)
        if why:
            raise DatabaseError(f"cannot write the database {self.display_url}: {why}")

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        try:
            return self.engine.url.render_as_string(hide_password=True)
        except AttributeError:
            return self.url

    def close(self) -> None:
        self.engine.dispose()

    # -- runs ---------------------------------------------------------------------------
    def create_run(
        self,
        *,
        spec,
        policy: str,
        device: str,
        settings: dict,
        rng_state: dict,
        policy_state: dict,
        snapshot: str,
        owner: str = "",
    ) -> str:
        with self.Session.begin() as s:
            for _ in range(8):  # ids are random: retry the (unlikely) clash
                run_id = new_run_id()
                if s.get(RunRow, run_id) is None:
                    break
            s.add(
                RunRow(
                    id=run_id,
                    spec_name=spec.name,
                    spec_path=str(spec.path or spec.reference),
                    spec_fingerprint=spec.fingerprint,
                    spec_snapshot=snapshot,
                    family=spec.family,
                    hardware=spec.hardware,
                    policy=policy,
                    device=device,
                    settings=settings,
                    rng_state=rng_state,
                    policy_state=policy_state,
                    owner=owner,
                )
            )
        return run_id

    def run(self, run_id: str) -> RunRow | None:
        with self.Session() as s:
            return s.get(RunRow, run_id)

    def runs(self) -> list[RunRow]:
        with self.Session() as s:
            return list(s.scalars(select(RunRow).order_by(RunRow.created_at.desc())))

    def update_run(self, run_id: str, **fields) -> None:
        fields["updated_at"] = time.time()
        with self.Session.begin() as s:
            s.execute(update(RunRow).where(RunRow.id == run_id).values(**fields))

    def node_counts(self) -> dict[str, dict[str, int]]:
        """Per run: nodes written, evaluated, correct."""
        out: dict[str, dict[str, int]] = {}
        with self.Session() as s:
            for run_id, n in s.execute(select(NodeRow.run_id, func.count()).group_by(NodeRow.run_id)):
                out[run_id] = {"nodes": n, "evaluated": 0, "correct": 0}
            for run_id, n, ok in s.execute(
                select(
                    EvaluationRow.run_id, func.count(), func.sum(func.cast(EvaluationRow.correct, Integer))
                ).group_by(EvaluationRow.run_id)
            ):
                out.setdefault(run_id, {"nodes": 0})
                out[run_id].update(evaluated=n, correct=int(ok or 0))
        return out

    # -- nodes and evaluations ----------------------------------------------------------
    def add_node(
        self, run_id: str, node: Node, *, rng_state: dict, elapsed_s: float, llm_call_ids: Iterable[int] = ()
    ) -> None:
        """Write a new node as pending (before it is evaluated), with its edges."""
        with self.Session.begin() as s:
            s.add(
                NodeRow(
                    run_id=run_id,
                    id=node.id,
                    source=node.source,
                    note=node.note,
                    state="pending",
                    tokens=node.tokens,
                    cost_usd=node.cost_usd,
                    created_at=node.created_at,
                )
            )
            s.flush()
            for position, parent in enumerate(node.parents):
                s.add(EdgeRow(run_id=run_id, child_id=node.id, parent_id=parent, position=position))
            ids = list(llm_call_ids)
            if ids:
                s.execute(update(LLMCallRow).where(LLMCallRow.id.in_(ids)).values(run_id=run_id, node_id=node.id))
            s.execute(
                update(RunRow)
                .where(RunRow.id == run_id)
                .values(rng_state=rng_state, elapsed_s=elapsed_s, updated_at=time.time())
            )

    def record_evaluation(
        self, run_id: str, node_id: int, result: EvalResult, *, policy_state: dict, rng_state: dict, elapsed_s: float
    ) -> None:
        """The evaluation, the node's new state, the policy and random state: one transaction."""
        with self.Session.begin() as s:
            s.execute(delete(EvaluationRow).where(EvaluationRow.run_id == run_id, EvaluationRow.node_id == node_id))
            s.add(
                EvaluationRow(
                    run_id=run_id,
                    node_id=node_id,
                    result=result.to_dict(),
                    correct=result.correct,
                    fitness=result.fitness,
                    failure=result.failure,
                    device=result.device,
                    duration_s=result.duration_s,
                )
            )
            s.execute(update(NodeRow).where(NodeRow.run_id == run_id, NodeRow.id == node_id).values(state=EVALUATED))
            s.execute(
                update(RunRow)
                .where(RunRow.id == run_id)
                .values(policy_state=policy_state, rng_state=rng_state, elapsed_s=elapsed_s, updated_at=time.time())
            )

    # -- baselines: the evaluator's cache of baseline timings (the one store; see BaselineStore) ---
    # A key (records.baselines.BaselineKey) is built by the evaluator from what it knows itself (never from
    # what a candidate's process reported); a row holds it in its columns.
    def baseline_timings(self, fingerprint: str) -> dict[BaselineKey, float]:
        """Every baseline timing of the spec with this fingerprint; newest wins."""
        out: dict[BaselineKey, float] = {}
        with self.Session() as s:
            rows = s.scalars(
                select(BaselineRow).where(BaselineRow.spec_fingerprint == fingerprint).order_by(BaselineRow.id)
            )
            for r in rows:
                out[BaselineKey.from_columns(r.spec_fingerprint, r.shape, r.device, r.software)] = r.baseline_ms
        return out

    def save_baseline(self, key: BaselineKey, milliseconds: float) -> None:
        """Insert or replace one timing (a re-timed baseline replaces the old one)."""
        where = dict(spec_fingerprint=key.fingerprint, shape=key.shape, device=key.gpu, software=key.software)
        for _ in range(2):  # a second process may insert the same key between our select and insert
            try:
                with self.Session.begin() as s:
                    row = s.scalar(select(BaselineRow).filter_by(**where))
                    if row is None:
                        s.add(BaselineRow(baseline_ms=milliseconds, **where))
                    else:
                        row.baseline_ms, row.created_at = milliseconds, time.time()
                return
            except IntegrityError:
                continue

    def baselines(self, spec_fingerprint: str) -> list[BaselineRow]:
        with self.Session() as s:
            return list(s.scalars(select(BaselineRow).filter_by(spec_fingerprint=spec_fingerprint)))

    def load_graph(self, run_id: str) -> SearchGraph:
        """The run's graph as written: evaluated nodes with their results, pending ones without."""
        graph = SearchGraph()
        with self.Session() as s:
            parents: dict[int, list[tuple[int, int]]] = {}
            for e in s.scalars(select(EdgeRow).where(EdgeRow.run_id == run_id)):
                parents.setdefault(e.child_id, []).append((e.position, e.parent_id))
            evals = {e.node_id: e for e in s.scalars(select(EvaluationRow).where(EvaluationRow.run_id == run_id))}
            verdicts = {
                r.node_id: r.verdict
                for r in s.scalars(select(ReviewRow).where(ReviewRow.run_id == run_id).order_by(ReviewRow.id))
            }  # the latest counts
            for row in s.scalars(select(NodeRow).where(NodeRow.run_id == run_id).order_by(NodeRow.id)):
                ev = evals.get(row.id) if row.state == EVALUATED else None
                graph.add(
                    Node(
                        id=row.id,
                        parents=tuple(p for _, p in sorted(parents.get(row.id, []))),
                        source=row.source,
                        note=row.note,
                        evaluation=EvalResult.from_dict(ev.result) if ev else None,
                        created_at=row.created_at,
                        tokens=row.tokens,
                        cost_usd=row.cost_usd,
                        approved=verdicts.get(row.id) == "approve",
                    )
                )
        return graph

    def totals(self, run_id: str) -> tuple[int, float]:
        """Tokens and cost spent on the run's nodes."""
        with self.Session() as s:
            tokens, cost = s.execute(
                select(
                    func.coalesce(func.sum(NodeRow.tokens), 0), func.coalesce(func.sum(NodeRow.cost_usd), 0.0)
                ).where(NodeRow.run_id == run_id)
            ).one()
        return int(tokens), float(cost)

    # -- context memory -----------------------------------------------------------------
    def add_insight(
        self, run_id: str | None, node_id: int | None, family: str, hardware: str, text: str, source: str = ""
    ) -> int:
        with self.Session.begin() as s:
            row = InsightRow(
                run_id=run_id, node_id=node_id, family=family or "", hardware=hardware or "", text=text, source=source
            )
            s.add(row)
            s.flush()
            return row.id

    def insights(
        self, family: str | None = None, hardware: str | None = None, limit: int = 20, run_id: str | None = None
    ) -> list[InsightRow]:
        """Across all runs, most recent first; None means any family / hardware. With `run_id`, that
        run's own insights too, whatever family they were filed under (a run resumed from before its
        family was known)."""
        q = select(InsightRow)
        if family is not None:
            q = q.where(
                InsightRow.family == family
                if run_id is None
                else or_(InsightRow.family == family, InsightRow.run_id == run_id)
            )
        if hardware is not None:
            q = q.where(InsightRow.hardware == hardware)
        with self.Session() as s:
            return list(s.scalars(q.order_by(InsightRow.created_at.desc(), InsightRow.id.desc()).limit(limit)))

    # -- LLM calls ----------------------------------------------------------------------
    def record_llm_call(self, run_id: str | None, node_id: int | None, record: LLMCallRecord) -> int:
        with self.Session.begin() as s:
            row = LLMCallRow(
                run_id=run_id,
                node_id=node_id,
                provider=record.provider,
                model=record.model,
                prompt=record.prompt,
                prompt_sha256=prompt_sha256(record.prompt),
                reply=record.reply,
                input_tokens=record.input_tokens,
                output_tokens=record.output_tokens,
                cost_usd=record.cost_usd,
                latency_s=record.latency_s,
                cached=record.cached,
                error=record.error,
                attempts=record.attempts,
            )
            s.add(row)
            s.flush()
            return row.id

    # -- the opt-in reply cache (kernelevolve/llm/cache.py: DatabaseReplyCache) ----------
    def cached_reply(self, key: str, position: int) -> ReplyCacheRow | None:
        with self.Session() as s:
            return s.get(ReplyCacheRow, (key, position))

    def cache_reply(self, key: str, position: int, reply: str, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Store the `position`-th reply for `key`; one already there is kept."""
        from sqlalchemy.exc import IntegrityError

        try:
            with self.Session.begin() as s:
                if s.get(ReplyCacheRow, (key, position)) is None:
                    s.add(
                        ReplyCacheRow(
                            key=key,
                            position=position,
                            reply=reply,
                            input_tokens=input_tokens,
                            output_tokens=output_tokens,
                        )
                    )
        except IntegrityError:  # another process stored it first
            pass

    def clear_reply_cache(self) -> int:
        with self.Session.begin() as s:
            return s.execute(delete(ReplyCacheRow)).rowcount or 0

    def llm_calls(self, run_id: str) -> list[LLMCallRow]:
        with self.Session() as s:
            return list(s.scalars(select(LLMCallRow).where(LLMCallRow.run_id == run_id).order_by(LLMCallRow.id)))

    # -- reviews ------------------------------------------------------------------------
    def add_review(self, run_id: str, node_id: int, reviewer: str, verdict: str, notes: str = "") -> int:
        with self.Session.begin() as s:
            row = ReviewRow(run_id=run_id, node_id=node_id, reviewer=reviewer, verdict=verdict, notes=notes)
            s.add(row)
            s.flush()
            return row.id

    def reviews(self, run_id: str) -> list[ReviewRow]:
        with self.Session() as s:
            return list(s.scalars(select(ReviewRow).where(ReviewRow.run_id == run_id).order_by(ReviewRow.id)))


class BaselineTable:
    """The experiment database as the evaluator's baseline store (safe across processes and hosts)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    def lookup(self, fingerprint: str) -> dict[BaselineKey, float]:
        return self.repo.baseline_timings(fingerprint)

    def save(self, key: BaselineKey, milliseconds: float) -> None:
        self.repo.save_baseline(key, milliseconds)


def _make_engine(url: str):
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # WAL: readers never block the writer; FULL: commits survive power loss
            cur = dbapi_conn.cursor()
            if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _sqlite_unwritable(url: str) -> str | None:
    """Why this process cannot write the SQLite file of `url` (None: it can, or not a SQLite file)."""
    import os

    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 (an unusable URL is reported where it is opened)
        return None
    path = parsed.database
    if not parsed.drivername.startswith("sqlite") or not path or path == ":memory:" or path.startswith("file:"):
        return None
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        return f"its folder {folder} does not exist"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return f"the file {path} is read-only (its permissions or an immutable attribute); give --db a writable file"
    if not os.access(folder, os.W_OK):
        return (
            f"its folder {folder} is not writable (SQLite writes its journal files beside the database); "
            "give --db a file in a writable folder"
        )
    return None
