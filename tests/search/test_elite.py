"""A new best is evaluated again before it counts; implausible or unstable results are held for a person."""

import threading

from kernelevolve.review import review
from kernelevolve.search.graph import best_nodes
from kernelevolve.views import fitness_text

from kernelevolve.runs.session import build_engine

from kernelevolve.evaluation.executors import EvaluationKind

from .helpers import SyntheticEvaluator, SyntheticOperator, result
from .test_engine import _start


class FlakyEvaluator(SyntheticEvaluator):
    """Its second look at a source measures a latency twice the first (a noisy or gamed timing)."""

    def __init__(self, flaky_above: float, **kw):
        super().__init__(**kw)
        self.flaky_above = flaky_above
        self.seen: dict[str, int] = {}
        self._seen_lock = threading.Lock()

    def run(self, request):
        out = super().run(request)
        with self._seen_lock:
            n = self.seen[request.source] = self.seen.get(request.source, 0) + 1
        if n > 1 and out.fitness and out.fitness > self.flaky_above:
            for s in out.shapes:
                s.latency_ms *= 2
        return out


class SuspiciousEvaluator(SyntheticEvaluator):
    """Marks results above a fitness as the real evaluator does for implausible speedups."""

    def run(self, request):
        out = super().run(request)
        if out.fitness and out.fitness > 1.2:
            out.marks["suspicious"] = f"{out.fitness:.1f}x over the baseline, above the bound"
        return out


def test_every_new_best_is_re_evaluated_and_agreeing_ones_count(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'e.db'}", spec, "greedy", nodes=12)
    evaluator = SyntheticEvaluator(parallelism=1)
    build_engine(repo, run_id, operator=SyntheticOperator(fail_rate=0.0), evaluator=evaluator).run()
    graph = repo.load_graph(run_id)
    rechecked = [n for n in graph.evaluated() if n.evaluation.recheck is not None]
    assert rechecked, "no node was ever re-evaluated"
    best = graph.best()
    assert best in rechecked and not best.held
    assert best.evaluation.recheck["fitness"] == best.fitness
    assert len(evaluator.calls) == len(graph) + len(rechecked)
    # One request each, naming its node and why: first evaluations, then each recheck (a profiled call).
    requests = evaluator.requests
    first = [r.node_id for r in requests if r.kind == EvaluationKind.FIRST]
    again = [r.node_id for r in requests if r.kind == EvaluationKind.RECHECK]
    assert sorted(first) == [n.id for n in graph.nodes() if n.source] and sorted(again) == [n.id for n in rechecked]
    assert all(
        r.deep == (r.kind == EvaluationKind.RECHECK) and r.spec.fingerprint == spec.fingerprint for r in requests
    )
    assert all(graph[r.node_id].source == r.source for r in requests)


def test_a_best_whose_re_evaluation_disagrees_is_held_as_unstable(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'u.db'}", spec, "greedy", nodes=12)
    build_engine(
        repo,
        run_id,
        operator=SyntheticOperator(fail_rate=0.0),
        evaluator=FlakyEvaluator(flaky_above=1.0, parallelism=1),
    ).run()
    graph = repo.load_graph(run_id)
    held = [n for n in graph.evaluated() if n.held]
    assert held and all("unstable" in n.evaluation.marks for n in held)
    assert all(n.fitness > 1.0 for n in held)
    assert "apart" in held[0].evaluation.marks["unstable"]
    best = best_nodes(graph, 1)
    assert not best or best[0].fitness <= 1.0  # a held node is never reported as the best
    assert "held for review" in fitness_text(held[0])


def test_a_suspicious_node_is_shown_but_not_best_until_a_person_approves_it(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 's.db'}", spec, "greedy", nodes=12)
    build_engine(
        repo, run_id, operator=SyntheticOperator(fail_rate=0.0), evaluator=SuspiciousEvaluator(parallelism=1)
    ).run()
    graph = repo.load_graph(run_id)
    suspicious = sorted((n for n in graph.evaluated() if n.held), key=lambda n: -n.fitness)
    assert suspicious, "the synthetic landscape produced no fitness above 1.2"
    top = suspicious[0]
    assert all(n.id != top.id for n in best_nodes(graph, 20))
    review(repo, run_id, top.id, "approve", notes="checked by hand", reviewer="tester")
    graph = repo.load_graph(run_id)
    assert graph[top.id].approved and not graph[top.id].held
    assert best_nodes(graph, 1)[0].id == top.id


def test_a_recheck_that_fails_marks_the_node_unstable(tmp_path, spec):
    class FailsSecondTime(SyntheticEvaluator):
        def run(self, request):
            first = request.source not in self.calls
            out = super().run(request)
            return out if first else result(failure="inconsistent")

    repo, run_id = _start(f"sqlite:///{tmp_path / 'f.db'}", spec, "greedy", nodes=6)
    build_engine(
        repo, run_id, operator=SyntheticOperator(fail_rate=0.0), evaluator=FailsSecondTime(parallelism=1)
    ).run()
    graph = repo.load_graph(run_id)
    rechecked = [n for n in graph.evaluated() if n.evaluation.recheck is not None]
    assert rechecked and all("re-evaluation failed (inconsistent)" in n.evaluation.marks["unstable"] for n in rechecked)
    assert best_nodes(graph, 1) == [] or best_nodes(graph, 1)[0].evaluation.recheck is None
