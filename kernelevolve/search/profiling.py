"""Profiles during a search (issues 11 and 34): which nodes are profiled, when, how, and when a run
has reached its roofline target.

A node is a candidate for a profile when it is promising: correct, not held for review, and a new
best or within `within` (default 5%) of the best score; with nothing timed (the interpreter) every
correct node is. Profiles cost GPU time the search would otherwise spend evaluating (each has its GPU
to itself), so they are held to a share of it (`share`, --profile-share, default 10%: the seconds
profiles ran over the run's elapsed seconds times its GPUs) and spent where they change a decision:

- the best node first: its profile goes into the prompts of the steps that improve on it (and decides
  a roofline stop); it may take the next free place of the evaluator ahead of waiting candidates;
- then a sample of the rest, best-scoring first, only while the evaluator has a free place that no
  candidate waits for (the GPU would otherwise idle), and only while the search still proposes;
- one profile at a time per GPU, and none that would take the share over its limit: before a
  profile starts, its expected length (the mean of this run's profiles, else a prior per tool) is
  counted as spent. Candidates that fall out of `within` of the best are dropped.

One case is profiled per node: the one where the candidate lags the baseline most (the first when
untimed), with the benchmark's median as the roofline's latency. Profiles run in the sandbox
(profiling/runner.py) with their own timeout, on a GPU slot borrowed from the evaluator so they
never overlap a timed evaluation on that GPU; under `--executor ray` on the worker that holds the
GPU (the executor's `worker_profiler`: RayExecutor.profile_on_worker).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields

from kernelevolve.evaluation.executors import Executor
from kernelevolve.records.result import EvalResult
from kernelevolve.profiling.collect import profile_candidate
from kernelevolve.profiling.runner import TOOLS
from kernelevolve.profiling.schema import NodeProfile
from kernelevolve.records.graph import Node, SearchGraph

DEFAULT_WITHIN = 0.05
DEFAULT_SHARE = 0.10
# Before a run has timed a profile of its own: seconds per tool (H200: torch, ncu and Proton
# took about 20 s each with the GPU held; the interpreter's torch profile a few seconds).
PRIOR_S_PER_TOOL = {"cuda": 20.0, "interpret": 5.0}


@dataclass
class ProfileSettings:
    tools: list[str] = field(default_factory=lambda: list(TOOLS))
    within: float = DEFAULT_WITHIN  # profile nodes scoring at least (1 - within) x the best
    timeout_s: float = 300.0  # per tool
    roofline_stop: float | None = None  # stop the run once a profiled node reaches this roofline fraction
    share: float = DEFAULT_SHARE  # at most this part of the GPU time goes to profiles (0 < share <= 1)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ProfileSettings":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


class Profiler:
    def __init__(
        self,
        settings: ProfileSettings,
        spec,
        device: str,
        shapes: list[dict] | None = None,
        evaluator: Executor | None = None,
        knowledge_base=None,
    ):
        self.settings, self.spec, self.device, self.shapes = settings, spec, device, shapes
        self.evaluator = evaluator
        self.knowledge_base = knowledge_base  # the run's (its kernels/ on the import path); None: the process's

    def wants(self, graph: SearchGraph, node: Node) -> bool:
        """Is this evaluated node promising enough to profile (now, against the graph's best)?"""
        ev = node.evaluation
        if ev is None or not ev.correct or node.held or not node.source:
            return False
        if ev.fitness is None:  # untimed: nothing to rank it by
            return True
        best = graph.best()
        return node.score >= (1 - self.settings.within) * (best.score if best is not None else 0.0)

    def prior_s(self) -> float:
        """The expected length of a profile before this run has timed one."""
        return PRIOR_S_PER_TOOL.get(self.device, 20.0) * max(1, len(self.settings.tools))

    def run(self, source: str, result: EvalResult) -> NodeProfile:
        """Worker thread: profile the node's worst case with the configured tools."""
        cases = self.spec.cases(self.device, self.shapes)
        by_label = {s.label: s for s in result.shapes}
        timed = [(by_label[c.label].speedup, c) for c in cases if c.label in by_label and by_label[c.label].speedup]
        case = min(timed, key=lambda t: t[0])[1] if timed else cases[0]
        latency = by_label[case.label].latency_ms if case.label in by_label else None
        latency_ms = {case.label: latency} if latency else None
        on_worker = self.evaluator.worker_profiler if self.evaluator is not None else None
        if on_worker is not None:  # a Ray worker holds the GPU: the profile is taken there
            return on_worker(
                self.spec, source, [case], self.settings.tools, timeout_s=self.settings.timeout_s, latency_ms=latency_ms
            )
        with self._gpu() as slot:
            t0 = time.monotonic()  # the time the GPU was held
            summaries = profile_candidate(
                self.spec,
                source,
                [case],
                self.settings.tools,
                device=self.device,
                gpu=slot or "0",
                timeout_s=self.settings.timeout_s,
                latency_ms=latency_ms,
                knowledge_base=self.knowledge_base,
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
        """A GPU to this profile alone (the executor's; none without one)."""
        return self.evaluator.gpu() if self.evaluator is not None else nullcontext(None)


class ProfilePlan:
    """Which node the engine profiles next, if any may start now (the rules in the module's docstring).

    The engine offers each node as it is recorded, asks `pick` whenever places change, and reports
    each profile's start and end; the seconds spent are the engine's (TimeLedger's)."""

    def __init__(self, profiler: Profiler, gpus: int, profiled: set[int] | None = None) -> None:
        self.profiler, self.gpus = profiler, max(1, gpus)
        self.done: set[int] = set(profiled or ())  # profiled (or tried) already
        self.running: set[int] = set()
        self.candidates: set[int] = set()
        self.durations: list[float] = []  # this session's profiles, seconds each

    def offer(self, graph: SearchGraph, node: Node) -> None:
        if node.id not in self.done and self.profiler.wants(graph, node):
            self.candidates.add(node.id)

    def expected_s(self) -> float:
        return sum(self.durations) / len(self.durations) if self.durations else self.profiler.prior_s()

    def affordable(self, spent_s: float, elapsed_s: float) -> bool:
        """Would one more profile, with those running, stay within the share once it is done?"""
        expected = self.expected_s()
        committed = spent_s + expected * (len(self.running) + 1)
        return committed <= self.profiler.settings.share * self.gpus * (elapsed_s + expected)

    def pick(self, graph: SearchGraph, *, idle: bool, searching: bool, spent_s: float, elapsed_s: float) -> int | None:
        """The node to profile now, or None. `idle`: a free place no candidate waits for; `searching`:
        more nodes will be proposed."""
        if not self.candidates or len(self.running) >= self.gpus or not self.affordable(spent_s, elapsed_s):
            return None
        for node_id in list(self.candidates):  # the ones no longer promising are dropped
            if not self.profiler.wants(graph, graph[node_id]):
                self.candidates.discard(node_id)
        if not self.candidates:
            return None
        first = min(self.candidates, key=lambda i: (-graph[i].score, i))
        best = graph.best()
        if (best is not None and first == best.id) or (idle and searching):
            return first
        return None

    def started(self, node_id: int) -> None:
        self.candidates.discard(node_id)
        self.running.add(node_id)

    def finished(self, node_id: int, seconds: float) -> None:
        self.running.discard(node_id)
        self.done.add(node_id)
        self.durations.append(seconds)


def resume_plan(repo, run_id: str, profiler: Profiler, gpus: int, graph: SearchGraph) -> tuple[dict, ProfilePlan]:
    """The run's stored profiles and a plan that offers the promising nodes not profiled yet (after a resume)."""
    from kernelevolve.memory.profiles import load_profiles

    profiles = {
        i: NodeProfile(summaries=r.summaries, seconds=r.seconds) for i, r in load_profiles(repo, run_id).items()
    }
    plan = ProfilePlan(profiler, gpus, profiled=set(profiles))
    for node in graph.evaluated():
        plan.offer(graph, node)
    return profiles, plan


def store_profile(repo, run_id: str, node_id: int, profile: NodeProfile) -> None:
    from kernelevolve.memory.profiles import save_profile

    save_profile(repo, run_id, node_id, [s.model_dump() for s in profile.summaries], profile.seconds)
