"""The engine profiles promising nodes (every new best; others within 5% of the best as the profile
share allows: here no limit, share 1), stores each profile with its node, shows it to the operator in the parent views of the next
steps and in `show --node`, and stops the run when a profiled node reaches the roofline target.
The profiling tools are replaced by a profile computed from the node's fitness (they need a GPU;
the sandboxed tools are tested in test_harness_templates.py and test_search_profiling.py), as the
engine tests replace the evaluator."""

from typer.testing import CliRunner

from kernelevolve.cli import app
from kernelevolve.memory import Repository
from kernelevolve.memory.profiles import load_profiles
from kernelevolve.profiling.roofline import roofline
from kernelevolve.profiling.schema import NodeProfile, ProfileSummary
from kernelevolve.profiling.tools.ncu import NcuKernel
from kernelevolve.search.profiling import ProfileSettings, Profiler
from kernelevolve.runs.session import RunSettings, build_engine, start_run
from kernelevolve.spec import Budget
from tests.search.helpers import SyntheticEvaluator, SyntheticOperator


class RecordingOperator(SyntheticOperator):
    def __init__(self):
        super().__init__(fail_rate=0.15)
        self.parents_seen = []  # (parent id, its profile) per improve step

    def improve(self, parents, context):
        self.parents_seen += [(p.node_id, p.profile) for p in parents]
        return super().improve(parents, context)


class FitnessProfiler(Profiler):
    """A profile whose roofline fraction is the node's fitness / 3 (memory-bound)."""

    def __init__(self, settings, spec):
        super().__init__(settings, spec, "cuda")
        self.profiled = []
        self.bests = []  # the nodes that were the best when their profile was asked for

    def prior_s(self):
        return 0.01

    def run(self, source, result):
        self.profiled.append(source)
        nbytes = result.fitness / 3 * 4249e6 * 1.0  # at 1 ms: this fraction of the H200's measured bandwidth
        summary = ProfileSummary(
            label=result.shapes[0].label,
            tools=["ncu"],
            ncu=[NcuKernel(name="k", duration_ms=1.0, registers_per_thread=40)],
            roofline=roofline(1.0, "benchmark", nbytes, None, "h200"),
        )
        return NodeProfile(summaries=[summary], seconds=0.5)


def _engine(db_url, spec, nodes, **profile):
    profile.setdefault("share", 1.0)
    repo = Repository(db_url)
    settings = RunSettings(
        policy="greedy",
        policy_options={"drafts": 2},
        limits=Budget(max_nodes=nodes),
        device="cuda",
        seed=5,
        profile=ProfileSettings(**profile).to_dict(),
    )
    run_id = start_run(repo, spec, settings)
    operator = RecordingOperator()
    profiler = FitnessProfiler(ProfileSettings(**profile), spec)
    engine = build_engine(
        repo, run_id, operator=operator, evaluator=SyntheticEvaluator(parallelism=1), profiler=profiler
    )
    return repo, run_id, engine, operator


def test_promising_nodes_are_profiled_stored_and_shown_to_the_next_steps(tmp_path, spec):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    repo, run_id, engine, operator = _engine(db, spec, nodes=14)
    assert engine.run() == "nodes"
    graph = repo.load_graph(run_id)
    stored = load_profiles(repo, run_id)
    best, bests, promising = 0.0, set(), set()
    for node in graph.nodes():  # one evaluation at a time: recorded in id order
        if node.correct and node.score > best:
            bests.add(node.id)
        best = max(best, node.score)
        if node.correct and node.score >= 0.95 * best:
            promising.add(node.id)
    assert bests <= set(stored) <= promising, (bests, set(stored), promising)
    assert len(stored) >= 2 and len(stored) < len(graph)
    assert len(engine.profiler.profiled) == len(stored)
    seen = dict(operator.parents_seen)
    # Steps proposed after a parent's profile came back show it (those proposed ahead of it cannot).
    assert seen and all(pid in stored for pid, profile in operator.parents_seen if profile is not None)
    shown = next(p for p in seen.values() if p is not None)
    assert "roofline:" in str(shown) and "ncu k: 1.0000 ms" in str(shown)
    node = max(stored)
    out = CliRunner().invoke(app, ["show", run_id, "--db", db, "--node", str(node)]).output
    assert "# profile (0.5 s of profiling):" in out and "roofline: 1.0000 ms (benchmark)" in out
    js = CliRunner().invoke(app, ["show", run_id, "--db", db, "--node", str(node), "--json"]).output
    assert '"seconds": 0.5' in js and '"bound": "' in js


def test_the_run_stops_when_a_profiled_node_reaches_the_roofline_target(tmp_path, spec):
    repo, run_id, engine, _ = _engine(f"sqlite:///{tmp_path / 'r.db'}", spec, nodes=200, roofline_stop=0.5)
    assert engine.run() == "roofline"
    assert repo.run(run_id).termination_reason == "roofline"
    graph = repo.load_graph(run_id)
    stored = load_profiles(repo, run_id)
    assert len(graph) < 200
    assert any(graph[i].fitness >= 1.5 for i in stored)  # fitness / 3 >= 0.5
