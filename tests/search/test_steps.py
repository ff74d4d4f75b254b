"""The step-kind rule (kernelevolve.steps) and the declared operator hooks, as the engine,
graph, insights, LLM operator and plugin loader use them."""

import pytest

from kernelevolve.memory import Repository
from kernelevolve.operators import BaseOperator, OperatorError, PluginOperator, resolve_operator
from kernelevolve.operators.base import ParentView
from kernelevolve.operators.insights import step_label
from kernelevolve.runs.session import RunSettings, build_engine, start_run
from kernelevolve.spec import Budget
from kernelevolve.steps import step_kind
from tests.search.helpers import SyntheticEvaluator, SyntheticOperator, result


@pytest.mark.parametrize(
    "parents, kind",
    [
        ([], "draft"),
        ([False], "debug"),
        ([True], "improve"),
        ([True, False], "crossover"),
        ([False, False, True], "crossover"),
    ],
)
def test_step_kind(parents, kind):
    assert step_kind(parents) == kind


def test_the_engine_graph_and_insights_name_each_step_alike(tmp_path, spec):
    """The kind the engine told the operator (in its recorded prompt) is the graph's kind of the node
    that came out, and the insight's label starts with it."""
    repo = Repository(f"sqlite:///{tmp_path / 's.db'}")
    settings = RunSettings(
        policy="evolutionary", policy_options={"drafts": 3}, limits=Budget(max_nodes=40), device="interpret", seed=4
    )
    run_id = start_run(repo, spec, settings)
    build_engine(
        repo, run_id, operator=SyntheticOperator(fail_rate=0.3), evaluator=SyntheticEvaluator(parallelism=2)
    ).run()
    graph = repo.load_graph(run_id)
    calls = {c.node_id: c.prompt for c in repo.llm_calls(run_id) if c.node_id is not None}
    kinds = set()
    for node in graph.nodes():
        kind = graph.kind(node.id)
        kinds.add(kind)
        assert f"kind={kind}" in calls[node.id]

        def view(i):
            return ParentView(node_id=i, source=graph[i].source, kind=graph.kind(i), evaluation=graph[i].evaluation)

        label = step_label(view(node.id), [view(p) for p in node.parents])
        assert label.startswith(kind), (label, kind)
    assert kinds == {"draft", "debug", "improve", "crossover"}


PLUGIN = """
from kernelevolve.operators.base import Proposal
from kernelevolve.operators.errors import OperatorError

class Bare:
    name = "bare"
    def draft(self, spec, context):
        return Proposal(source="x = 1")
    def improve(self, parents, context):
        return Proposal(source="x = 2")

class Picky(Bare):
    def check(self, spec):
        raise OperatorError(f"picky: {spec.name} is not mine")
"""


def test_a_plugin_gets_the_hooks_it_lacks_and_keeps_its_own(tmp_path, spec):
    path = tmp_path / "plugin.py"
    path.write_text(PLUGIN)
    bare = resolve_operator(f"plugin:{path}:Bare")
    assert isinstance(bare, PluginOperator) and bare.name == "bare"
    bare.check(spec)
    bare.check_endpoint()
    assert bare.replay([]) == 0
    assert bare.write_insight(spec, ParentView(1, "x", "draft", result(1.0)), []) is None
    with pytest.raises(OperatorError, match="picky: search_test_scale is not mine"):
        resolve_operator(f"plugin:{path}:Picky").check(spec)
    assert isinstance(resolve_operator("offline"), BaseOperator)  # ours are returned as they are
