"""The static cost estimate that ranks untimed (interpreter) candidates: what it is made of, how selection
uses it, that it is never shown as a speedup, and a real probe telling a one-pass softmax from a two-pass
one (kernelevolve/evaluation/static_cost.py, static_probe.py)."""

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelevolve.evaluation import static_cost
from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from kernelevolve.search.graph import Node, SearchGraph, best_nodes
from kernelevolve.search.policies import make_policy
from kernelevolve.spec import load_spec
from kernelevolve.views import fitness_text

pytestmark = pytest.mark.static_cost  # the estimate is part of what these tests check

TWO_PASS = (Path(__file__).parent / "fixtures" / "softmax_two_pass.py").read_text()
ONE_PASS = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()
H200 = static_cost.GPUS["h200"]


def _probe(launches, kernels, io_bytes=1000):
    return {
        "launches": [{"kernel": k, "key": k, "programs": 4, "bytes": b} for k, b in launches],
        "kernels": {k: {"name": k} | v for k, v in kernels.items()},
        "io_bytes": io_bytes,
    }


def test_occupancy_follows_registers_shared_memory_and_warps():
    assert static_cost.occupancy({"registers": 32, "num_warps": 4}, H200) == 1.0
    assert static_cost.occupancy({"registers": 255, "num_warps": 8}, H200) == 0.125  # one block of 8 warps
    assert static_cost.occupancy({"registers": 32, "num_warps": 4, "shared_bytes": 200 << 10}, H200) == 4 / 64
    assert static_cost.occupancy({"registers": 32, "num_warps": 4, "shared_bytes": 300 << 10}, H200) == 0.0
    assert static_cost.occupancy({"num_warps": 4}, H200) is None  # not compiled: unknown


def test_the_cost_counts_extra_bytes_launches_low_occupancy_and_spills():
    good = {"registers": 32, "num_warps": 4, "spill_bytes": 0}
    one = static_cost.estimate(_probe([("k", 1000)], {"k": good}), None, "h200")
    assert one["cost"] == 1.0 and one["minimal_from"].startswith("inputs, outputs")
    two = static_cost.estimate(_probe([("a", 1000), ("b", 500)], {"a": good, "b": good}), None, "h200")
    assert two["cost"] == pytest.approx(1.5 + static_cost.LAUNCH_COST) and two["launches"] == 2
    starved = static_cost.estimate(
        _probe([("k", 1000)], {"k": good | {"registers": 255, "num_warps": 1, "shared_bytes": 100 << 10}}), None, "h200"
    )
    assert starved["cost"] == pytest.approx(4.0)  # 2 blocks of one warp (shared memory): 1/32 of the SM's warps
    spilled = static_cost.estimate(_probe([("k", 1000)], {"k": good | {"spill_bytes": 128}}), None, "h200")
    assert spilled["cost"] == pytest.approx(1.5)
    by_spec = static_cost.estimate(_probe([("k", 1000)], {"k": good}), 500.0, "h200")
    assert by_spec["cost"] == 2.0 and by_spec["minimal_from"] == "the spec's bytes"
    failed = static_cost.estimate(
        _probe([("k", 1000)], {"k": {"error": "does not compile for the GPU: x"}}), None, "b200"
    )
    # Correct under the interpreter, but it will not run on the spec's GPU: ranked below every kernel that will.
    assert failed["cost"] == 8.0 and failed["target"] == "sm_100 (b200)"
    assert failed["notes"] == ["k does not compile for the GPU: x"]
    unknown = static_cost.estimate(
        _probe([("k", 1000)], {"k": {"error": "not compiled: time budget spent"}}), None, "h200"
    )
    assert unknown["cost"] == 1.0  # not known to fail: bytes and launches still count


def _evaluated(cost=None, fitness=None, error=None, correct=True) -> EvalResult:
    shape = ShapeResult(label="s", params={}, dtype="float32", correct=correct)
    if fitness is not None:
        shape.latency_ms, shape.baseline_ms = 1.0, fitness
    result = EvalResult(correct=correct, shapes=[shape], device="cuda" if fitness else "interpret", timed=bool(fitness))
    if cost is not None or error is not None:
        result.static = (
            {"cost": cost, "launches": 1, "bytes": 1, "minimal_bytes": 1} if cost is not None else {"error": error}
        )
    return result


def _graph(*results) -> SearchGraph:
    graph = SearchGraph()
    for i, result in enumerate(results):
        graph.add(Node(id=i, source="x"))
        graph.set_evaluation(i, result)
    return graph


def test_untimed_nodes_are_ranked_by_their_estimate_not_by_age():
    ties = _graph(_evaluated(), _evaluated())
    assert ties.best().id == 0  # no estimate: all ties, the earliest is best (as before)
    graph = _graph(_evaluated(cost=1.77), _evaluated(cost=1.0), _evaluated(error="no Triton launch"))
    assert graph.best().id == 1 and [n.id for n in best_nodes(graph)] == [1, 0, 2]
    assert graph[0].score < graph[1].score < 1.0 and graph[2].score == 0.5  # a failed estimate ranks last
    for name in ("greedy", "mcts", "evolutionary"):
        policy = make_policy(name, drafts=1, debug_prob=0.0)
        for node in graph.nodes():
            policy.observe(graph, node.id)
        picks = [policy.select(graph, 1, random.Random(seed))[0].parents for seed in range(40)]
        if name == "greedy":
            assert set(picks) == {(1,)}
        else:
            assert picks.count((1,)) > picks.count((0,)), (name, picks)
    timed = _graph(_evaluated(cost=1.0), _evaluated(fitness=1.3))
    assert timed.best().id == 1  # a timed speedup ranks above any estimate


def test_the_estimate_is_shown_as_an_estimate_never_as_a_speedup():
    node = _graph(_evaluated(cost=1.7656))[0]
    assert fitness_text(node) == "correct (untimed) est. cost 1.77"
    static = static_cost.estimate(
        _probe([("k", 1500)], {"k": {"registers": 40, "num_warps": 4, "spill_bytes": 0, "shared_bytes": 16}}),
        1000.0,
        "h200",
    )
    line = static_cost.summary(static)
    assert line.startswith("est. cost 1.50 (sm_90 (h200), static, not timed): 1 launch; 1.50x the minimal bytes")
    assert (
        "k: 40 regs, no spills, 16 B shared, occupancy 75%" in line and "speedup" not in line
    )  # 40 registers: 12 blocks of 4 warps
    assert static_cost.score({"error": "x"}) is None and static_cost.score(None) is None


def test_a_real_probe_ranks_one_launch_over_two_passes(monkeypatch):
    """Both kernels run under the interpreter and compile for sm_90 here (ptxas from Triton's wheel)."""
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    cases = spec.cases("interpret", None)
    with ThreadPoolExecutor(2) as pool:
        one, two = pool.map(
            lambda source: static_cost.measure(spec, source, cases, timeout_s=240), (ONE_PASS, TWO_PASS)
        )
    assert "error" not in one and "error" not in two, (one, two)
    assert one["shape"] == two["shape"] == "M=4,N=256 bfloat16"  # the smaller of the spec's interpret_shapes
    assert (one["launches"], two["launches"]) == (1, 2)
    assert one["bytes"] == one["minimal_bytes"] == 2 * 4 * 256 * 2  # x read once, y written once (bf16)
    assert two["bytes"] > 1.4 * two["minimal_bytes"]  # x read twice, plus the row statistics
    kernels = {**one["kernels"], **two["kernels"]}
    assert set(kernels) == {"_softmax_tile_kernel", "_row_stats", "_normalise"}
    assert all(k["registers"] > 0 and k["spill_bytes"] == 0 and k["occupancy"] > 0 for k in kernels.values()), kernels
    assert one["cost"] < two["cost"]
    graph = _graph(_evaluated(cost=two["cost"]), _evaluated(cost=one["cost"]))
    assert graph.best().id == 1


def test_a_source_already_probed_gets_its_estimate_without_new_processes(monkeypatch, tmp_path):
    """A search's operator often writes a kernel it wrote before: its estimate is the first one's, and only
    an estimate that was made is reused (an error is probed again)."""
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    cases = spec.cases("interpret", None)
    made = []

    def measure(probe):  # the two sandboxed processes, counted
        made.append(probe.key[-1])
        probe.stop()
        return {"error": "no launch"} if "broken" in probe.key[-1] else {"cost": 1.5 + len(made), "launches": 1}

    monkeypatch.setattr(static_cost.Probe, "measure", measure)
    monkeypatch.setattr(static_cost, "_MADE", {})
    results = []
    for source in (ONE_PASS, TWO_PASS, ONE_PASS, "# broken", "# broken", ONE_PASS):
        result = _evaluated()
        static_cost.start(spec, source, cases, 60, scratch_root=tmp_path).finish(result)
        results.append(result.static)
    assert made == [ONE_PASS, TWO_PASS, "# broken", "# broken"]
    assert results[0] == results[2] == results[5] == {"cost": 2.5, "launches": 1} != results[1]
    assert results[3] == results[4] == {"error": "no launch"}
    assert list(tmp_path.iterdir()) == []  # every probe's folder is gone, reused or not
