"""Which search nodes are profiled (a new best, or within 5% of it; every correct node when
nothing is timed), when a run has reached its roofline target, a real profile of a node in the
sandbox, and the offline operator's step for a spilling parent."""

import random

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.operators.profile_guidance import spill_step
from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from kernelevolve.profiling.roofline import roofline
from kernelevolve.profiling.schema import NodeProfile, ProfileSummary
from kernelevolve.profiling.tools.ncu import NcuKernel
from kernelevolve.search.graph import Node, SearchGraph
from kernelevolve.search.profiling import ProfileSettings, Profiler
from kernelevolve.spec import load_spec

SPEC = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
KERNEL = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()


def _result(speedup: float | None, correct: bool = True, marks: dict | None = None) -> EvalResult:
    shape = ShapeResult(
        label="M=32768,N=4096 bfloat16",
        params={"M": 32768, "N": 4096},
        dtype="bfloat16",
        correct=correct,
        latency_ms=None if speedup is None else 0.1,
        baseline_ms=None if speedup is None else 0.1 * speedup,
    )
    return EvalResult(
        correct=correct,
        device="cuda" if speedup else "interpret",
        shapes=[shape],
        timed=speedup is not None,
        marks=marks or {},
        failure=None if correct else "incorrect",
    )


def _graph(*results) -> SearchGraph:
    g = SearchGraph()
    for i, r in enumerate(results):
        g.add(Node(id=i, source="src"))
        g.set_evaluation(i, r)
    return g


def _asked_as_recorded(profiler, results) -> list[bool]:
    """wants() for each node right after it is recorded, as the engine asks."""
    g, answers = SearchGraph(), []
    for i, r in enumerate(results):
        g.add(Node(id=i, source="src"))
        g.set_evaluation(i, r)
        answers.append(profiler.wants(g, g[i]))
    return answers


def test_promising_nodes_are_a_new_best_or_within_five_percent():
    results = [
        _result(2.0),
        _result(1.95),
        _result(1.8),
        _result(None, correct=False),
        _result(3.0, marks={"suspicious": "12x"}),
        _result(2.1),
        _result(1.97),
    ]
    answers = _asked_as_recorded(Profiler(ProfileSettings(), SPEC, "cuda"), results)
    assert answers == [True, True, False, False, False, True, False]  # 1.97 < 0.95 x 2.1
    assert _asked_as_recorded(Profiler(ProfileSettings(within=0.2), SPEC, "cuda"), results)[2]  # configurable
    untimed = [_result(None), _result(None, correct=False)]
    assert _asked_as_recorded(Profiler(ProfileSettings(), SPEC, "interpret"), untimed) == [True, False]


def _profile(fraction_of_peak: float, spills: bool = False) -> NodeProfile:
    ms = 2 * 32768 * 4096 * 2 / (fraction_of_peak * 4249e6)
    kernel = NcuKernel(name="k", duration_ms=ms, local_load_bytes=4096.0 if spills else 0.0)
    return NodeProfile(
        summaries=[
            ProfileSummary(
                label="x", tools=["ncu"], ncu=[kernel], roofline=roofline(ms, "ncu", 2 * 32768 * 4096 * 2, None, "h200")
            )
        ]
    )


def test_the_roofline_target_stops_a_run_only_for_a_trusted_node():
    g = _graph(_result(1.5), _result(3.0, marks={"suspicious": "x"}))
    settings = ProfileSettings(roofline_stop=0.85)
    p = Profiler(settings, SPEC, "cuda")
    assert not p.reached(g, {0: _profile(0.80)})
    assert p.reached(g, {0: _profile(0.90)})
    assert not p.reached(g, {1: _profile(0.95)})  # held for review: never counts
    assert not Profiler(ProfileSettings(), SPEC, "cuda").reached(g, {0: _profile(0.99)})  # no target set


def test_a_node_is_profiled_in_the_sandbox_at_its_first_case_when_untimed():
    cases = SPEC.cases("interpret")
    result = EvalResult(
        correct=True,
        device="interpret",
        shapes=[ShapeResult(label=c.label, params=c.params, dtype=c.dtype, correct=True) for c in cases],
    )
    profile = Profiler(ProfileSettings(tools=["torch"]), SPEC, "interpret").run(KERNEL, result)
    (summary,) = profile.summaries
    assert summary.label == cases[0].label and summary.tools == ["torch"] and summary.parts["torch"].calls == 3
    assert profile.seconds > 0 and "Profile at " + cases[0].label in str(profile)


def test_a_spilling_parent_moves_one_resource_knob_down():
    declared = read_declared(KERNEL)
    config, tunables = declared.config, declared.tunables
    assert spill_step(_profile(0.5, spills=False), config, tunables, set(), random.Random(0)) is None
    assert spill_step(None, config, tunables, set(), random.Random(0)) is None
    for seed in range(5):
        new = spill_step(_profile(0.5, spills=True), config, tunables, set(), random.Random(seed))
        (moved,) = [k for k in tunables if new[k] != config[k]]
        assert any(word in moved for word in ("warps", "block", "tile", "elems", "stages"))
        assert tunables[moved].index(new[moved]) == tunables[moved].index(config[moved]) - 1
