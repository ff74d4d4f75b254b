"""Profiles during a search (issue 11): which nodes are profiled, how, and when a run has reached
its roofline target.

A node is profiled when it is promising: correct, not held for review, and a new best or within
`within` (default 5%) of the best score; with nothing timed (the interpreter) every correct node
is. One case is profiled per node: the one where the candidate lags the baseline most (the first
when untimed), with the benchmark's median as the roofline's latency. Profiles run in the sandbox
(profiling/runner.py) with their own timeout, on a GPU slot borrowed from the evaluator so they
never overlap a timed evaluation on that GPU.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

from kernelevolve.evaluation.result import EvalResult
from kernelevolve.profiling.collect import profile_candidate
from kernelevolve.profiling.runner import TOOLS
from kernelevolve.profiling.schema import NodeProfile
from kernelevolve.search.graph import Node, SearchGraph

DEFAULT_WITHIN = 0.05


@dataclass
class ProfileSettings:
    tools: list[str] = field(default_factory=lambda: list(TOOLS))
    within: float = DEFAULT_WITHIN  # profile nodes scoring at least (1 - within) x the best
    timeout_s: float = 300.0  # per tool
    roofline_stop: float | None = None  # stop the run once a profiled node reaches this roofline fraction

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ProfileSettings":
        return cls(**d)


class Profiler:
    def __init__(self, settings: ProfileSettings, spec, device: str, shapes: list[dict] | None = None, evaluator=None):
        self.settings, self.spec, self.device, self.shapes = settings, spec, device, shapes
        self.evaluator = evaluator

    def wants(self, graph: SearchGraph, node: Node) -> bool:
        """Is this just-recorded node promising enough to profile?"""
        ev = node.evaluation
        if ev is None or not ev.correct or node.held or not node.source:
            return False
        if ev.fitness is None:  # untimed: nothing to rank it by
            return True
        best = max((n.score for n in graph.evaluated() if not n.held), default=0.0)
        return node.score >= (1 - self.settings.within) * best

    def run(self, source: str, result: EvalResult) -> NodeProfile:
        """Worker thread: profile the node's worst case with the configured tools."""
        cases = self.spec.cases(self.device, self.shapes)
        by_label = {s.label: s for s in result.shapes}
        timed = [(by_label[c.label].speedup, c) for c in cases if c.label in by_label and by_label[c.label].speedup]
        case = min(timed, key=lambda t: t[0])[1] if timed else cases[0]
        latency = by_label[case.label].latency_ms if case.label in by_label else None
        t0 = time.monotonic()
        with self._gpu() as slot:
            summaries = profile_candidate(
                self.spec,
                source,
                [case],
                self.settings.tools,
                device=self.device,
                gpu=slot or "0",
                timeout_s=self.settings.timeout_s,
                latency_ms={case.label: latency} if latency else None,
            )
        return NodeProfile(summaries=summaries, seconds=time.monotonic() - t0)

    def reached(self, graph: SearchGraph, profiles: dict[int, NodeProfile]) -> bool:
        """A profiled, correct, unheld node at or above the roofline target."""
        target = self.settings.roofline_stop
        if target is None:
            return False
        for node_id, profile in profiles.items():
            node = graph[node_id] if node_id in graph else None
            fraction = profile.roofline_fraction
            if node is not None and node.correct and not node.held and fraction is not None and fraction >= target:
                return True
        return False

    def _gpu(self):
        """A GPU to this profile alone (the evaluator's, where it has them; test doubles have none)."""
        gpu = getattr(self.evaluator, "gpu", None)
        return gpu() if gpu is not None else nullcontext(None)
