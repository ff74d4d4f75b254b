"""Context memory: after each evaluation, one short analysis of what the step did.

The engine calls its `insight_writer(spec, child, parents)` on a worker thread after every
evaluation and stores the text with the run's family and hardware, so later prompts (of this
run and of other runs on the same family) can use it. Without a model the insight is written by
rules: what changed, what failed, which shapes gained or regressed and by how much.
"""

from __future__ import annotations

import math

from kernelevolve.operators.base import ParentView
from kernelevolve.records.result import Failure
from kernelevolve.steps import step_kind

MOVE = 0.02  # per-shape changes within +-2% are timing noise, not a result


def step_label(child: ParentView, parents: list[ParentView]) -> str:
    note = f" ({child.note})" if child.note else ""
    kind = step_kind([not p.failed for p in parents])
    if kind == "draft":
        return f"draft #{child.node_id}{note}"
    if kind == "crossover":
        return f"crossover #{child.node_id} of " + " x ".join(f"#{p.node_id}" for p in parents) + note
    return f"{kind} of #{parents[0].node_id} -> #{child.node_id}{note}"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%"


def rule_insight(spec, child: ParentView, parents: list[ParentView]) -> str | None:
    """One line, e.g. `improve of #3 -> #7 (BLOCK_N 1024->2048): M=32768,N=4096 bfloat16
    regressed 0.91x; others +12% (fitness 1.10x -> 1.18x)`."""
    ev = child.evaluation
    if ev is None or ev.failure == Failure.OPERATOR:  # the tool failed, not a kernel: nothing for a later prompt
        return None
    head = step_label(child, parents)
    if not ev.correct:
        bad = [s for s in ev.shapes if s.correct is False]
        where = (
            f" at {', '.join(s.label for s in bad[:3])}" + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "")
            if bad
            else ""
        )
        err = next((f"; max abs err {s.max_abs_err:.3g}" for s in bad if s.max_abs_err is not None), "")
        return f"{head}: FAILED {ev.failure}{where}{err}: {(ev.message or '').strip()[:200]}"
    if not ev.timed:
        # Untimed (interpreter): only a repair says something a later prompt can use.
        fixed = [p for p in parents if p.failed and p.evaluation is not None]
        if not fixed:
            return None
        return f"{head}: fixed the parent's {fixed[0].evaluation.failure} failure; correct at all {len(ev.shapes)} shapes (untimed)"
    parent = parents[0] if len(parents) == 1 else max(parents, key=lambda p: p.fitness or 0, default=None)
    fit = ev.fitness
    if parent is None or parent.evaluation is None or not parent.evaluation.correct or not parent.evaluation.timed:
        speed = sorted(ev.shapes, key=lambda s: s.speedup or 0)
        slowest = f"; slowest {speed[0].label} at {speed[0].speedup:.2f}x" if speed and speed[0].speedup else ""
        was = " (parent failed)" if parent is not None and parent.failed else ""
        return f"{head}: correct{was}, {fit:.2f}x over {spec.baseline if spec else 'the baseline'}{slowest}"
    before = {s.label: s.latency_ms for s in parent.evaluation.shapes}
    ratios = [(s.label, before[s.label] / s.latency_ms) for s in ev.shapes if s.latency_ms and before.get(s.label)]
    regressed = [(label, r) for label, r in ratios if r < 1 - MOVE]
    improved = [r for _, r in ratios if r > 1 + MOVE]
    parts = [f"{label} regressed {r:.2f}x" for label, r in regressed]
    if improved:
        gain = math.exp(sum(math.log(r) for r in improved) / len(improved))
        who = "others" if regressed else ("all shapes" if len(improved) == len(ratios) else f"{len(improved)} shapes")
        parts.append(f"{who} {_pct(gain)}")
    if not parts:
        parts.append(f"no shape moved by more than {MOVE:.0%}")
    trend = f" (fitness {parent.fitness:.2f}x -> {fit:.2f}x)" if parent.fitness and fit else ""
    return f"{head}: " + "; ".join(parts) + trend
