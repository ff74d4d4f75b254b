"""What the review pages show, as plain JSON-able data: one summary per run (the tree, the
fitness curve, the best nodes' per-shape numbers, the settings) and one detail per node (source,
diffs against its parents, model calls, evaluation, reviews). `report` writes these to files,
`serve` answers them over HTTP; both render them with the same static/app.js.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict

from kernelevolve.memory.profiles import load_profiles
from kernelevolve.review import VERDICTS
from kernelevolve.review.layout import tree_layout
from kernelevolve.records.graph import SearchGraph, best_nodes
from kernelevolve.views import fitness_text, node_fields, run_fields

LOG_TAIL_LINES = 80  # a failure's log is trimmed to its end: the traceback is there
BEST_SHOWN = 5


class PageError(LookupError):
    """No such run or node; str() is one line."""


def runs_index(repo) -> list[dict]:
    """Every run in the database, newest first, with its node counts."""
    counts = repo.node_counts()
    return [
        {
            "id": r.id,
            "spec": r.spec_name,
            "policy": r.policy,
            "device": r.device,
            "status": r.status,
            "termination_reason": r.termination_reason,
            "created_at": r.created_at,
            "updated_at": r.updated_at,
            "model": (r.settings or {}).get("model") or "offline",
            **counts.get(r.id, {"nodes": 0}),
        }
        for r in repo.runs()
    ]


def run_stamp(repo, run_id: str) -> dict:
    """What changes while a search runs or people review it, cheap to ask every few seconds (the
    summary of a 2,000-node run costs a second of CPU)."""
    run = repo.run(run_id)
    if run is None:
        raise PageError(f"no run {run_id} in {repo.display_url}")
    return {
        "updated_at": run.updated_at,
        "status": run.status,
        "nodes": repo.node_counts().get(run_id, {}).get("nodes", 0),
        "review_count": len(repo.reviews(run_id)),
    }


def run_summary(repo, run_id: str, graph: SearchGraph | None = None) -> dict:
    """The run page's data: settings, the laid-out tree, the fitness curve, the best nodes."""
    run = repo.run(run_id)
    if run is None:
        raise PageError(f"no run {run_id} in {repo.display_url}")
    graph = graph if graph is not None else repo.load_graph(run_id)
    tokens, cost = repo.totals(run_id)
    calls = repo.llm_calls(run_id)
    reviews = repo.reviews(run_id)
    latest = {r.node_id: r.verdict for r in reviews}  # rows come oldest first
    positions = tree_layout(graph)
    nodes = []
    for n in graph.nodes():
        ev = n.evaluation
        x, depth = positions[n.id]
        nodes.append(
            {
                **node_fields(graph, n),
                "held": n.held,
                "marks": sorted(ev.marks) if ev is not None else [],
                "verdict": latest.get(n.id),
                "text": fitness_text(n),
                "note": n.note[:200],
                "x": x,
                "depth": depth,
            }
        )
    best = best_nodes(graph, BEST_SHOWN)
    return {
        **run_fields(run),
        "model": (run.settings or {}).get("model") or "offline",
        "tokens": tokens,
        "cost_usd": cost,
        "llm_calls": len(calls),
        "review_count": len(reviews),
        "timed": any(n.evaluation.timed for n in graph.evaluated()),  # a failed node's 0.0 is no timing
        "nodes": nodes,
        "best": [
            {
                "id": n.id,
                "text": fitness_text(n),
                "fitness": n.fitness,
                "kind": graph.kind(n.id),
                "note": n.note[:200],
                "shapes": [_shape_row(s) for s in n.evaluation.shapes],
            }
            for n in best
        ],
        "verdicts": list(VERDICTS),
    }


def node_details(repo, run_id: str, only: int | None = None, graph: SearchGraph | None = None) -> dict[int, dict]:
    """Each node's page (or only node `only`'s): one query per table, whatever the run's size."""
    if repo.run(run_id) is None:
        raise PageError(f"no run {run_id} in {repo.display_url}")
    graph = graph if graph is not None else repo.load_graph(run_id)
    if only is not None and only not in graph:
        raise PageError(f"run {run_id} has no node {only}")
    calls: dict[int | None, list] = {}
    for c in repo.llm_calls(run_id):
        calls.setdefault(c.node_id, []).append(c)
    reviews: dict[int, list] = {}
    for r in repo.reviews(run_id):
        reviews.setdefault(r.node_id, []).append(r)
    profiles = load_profiles(repo, run_id)
    wanted = [graph[only]] if only is not None else graph.nodes()
    out = {}
    for n in wanted:
        ev = n.evaluation
        # Not cli.run_views.node_dict: its best descendant per node costs O(nodes x descendants).
        d = {
            **node_fields(graph, n),
            "note": n.note,
            "source": n.source,
            "tokens": n.tokens,
            "cost_usd": n.cost_usd,
            "approved": n.approved,
        }
        d.update(
            {
                "message": ev.message,
                "marks": dict(ev.marks),
                "recheck": ev.recheck,
                "timed": ev.timed,
                "log_tail": "\n".join(ev.log.splitlines()[-LOG_TAIL_LINES:]),
                "versions": asdict(ev.versions),
                "scheduling": asdict(ev.scheduling),
                "diagnostics": asdict(ev.diagnostics),
                "phases_s": ev.phases_s,
                "shapes": [_shape_row(s) for s in ev.shapes],
            }
            if ev is not None
            else {
                "message": "",
                "marks": {},
                "recheck": None,
                "timed": False,
                "log_tail": "",
                "versions": {},
                "scheduling": {},
                "diagnostics": {},
                "phases_s": {},
                "shapes": [],
            }
        )
        d["diffs"] = [{"parent": p, "diff": source_diff(graph[p].source, n.source, p, n.id)} for p in n.parents]
        d["calls"] = [_call_row(c) for c in calls.get(n.id, [])]
        d["reviews"] = [
            {"reviewer": r.reviewer, "verdict": r.verdict, "notes": r.notes, "created_at": r.created_at}
            for r in reviews.get(n.id, [])
        ]
        d["profile"] = _profile(profiles.get(n.id))
        d["run_id"] = run_id
        out[n.id] = d
    return out


def run_calls(repo, run_id: str) -> list[dict]:
    """Every model call of the run, in order: the node's own and the run's (insights), the audit trail."""
    if repo.run(run_id) is None:
        raise PageError(f"no run {run_id} in {repo.display_url}")
    return [_call_row(c) for c in repo.llm_calls(run_id)]


def _call_row(c) -> dict:
    return {
        "id": c.id,
        "node_id": c.node_id,
        "provider": c.provider,
        "model": c.model,
        "prompt": c.prompt,
        "reply": c.reply,
        "input_tokens": c.input_tokens,
        "output_tokens": c.output_tokens,
        "cost_usd": c.cost_usd,
        "latency_s": c.latency_s,
        "cached": c.cached,
        "error": c.error,
        "created_at": c.created_at,
    }


def _profile(row) -> dict | None:
    """The node's stored profiles (kernelevolve profile / --profile in a search): a readable text per
    profiled case, as the optimise prompts carry it, and the raw summaries."""
    if row is None:
        return None
    from kernelevolve.profiling.schema import ProfileSummary

    texts = []
    for summary in row.summaries:
        try:
            texts.append(ProfileSummary.model_validate(summary).prompt_text())
        except ValueError:  # a summary from another version of the schema: shown raw only
            texts.append(f"Profile at {summary.get('label', '?')}: (see the raw summary)")
    return {"text": "\n\n".join(texts), "seconds": row.seconds, "summaries": row.summaries}


def _shape_row(s) -> dict:
    return {
        "label": s.label,
        "correct": s.correct,
        "failure": s.failure,
        "message": s.message,
        "max_abs_err": s.max_abs_err,
        "latency_ms": s.latency_ms,
        "baseline_ms": s.baseline_ms,
        "speedup": s.speedup,
        "gbps": s.gbps,
        "tflops": s.tflops,
    }


def node_detail(repo, run_id: str, node_id: int) -> dict:
    return node_details(repo, run_id, only=node_id)[node_id]


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.M)


def source_diff(old: str | None, new: str | None, old_id: int, new_id: int, context: int = 3) -> str:
    """A unified diff of a parent's source against the child's ('' when either has none).

    A child usually changes a few lines of a long module: the lines both share at the start and
    the end are cut before difflib compares them (its matcher is quadratic-ish in what it sees,
    and a 2,000-node report makes 2,000 diffs), and the hunk headers shifted back."""
    if old is None or new is None:
        return ""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start, cut = max(0, head - context), max(0, tail - context)
    text = "".join(
        difflib.unified_diff(
            a[start : len(a) - cut],
            b[start : len(b) - cut],
            fromfile=f"node {old_id}",
            tofile=f"node {new_id}",
            n=context,
        )
    )
    if not start:
        return text
    return _HUNK.sub(lambda m: f"@@ -{int(m[1]) + start}{m[2] or ''} +{int(m[3]) + start}{m[4] or ''} @@", text)
