"""tests/operators/offline_search_sim.py (the offline operator's local search on synthetic latency
landscapes) still runs against the engine and operator as they are: one small landscape."""

from tests.operators import offline_search_sim as sim


def test_the_simulation_runs_and_the_search_improves_on_the_reference(capsys):
    outcome = sim.simulate(seed=0, nodes=10)
    # Every node a configuration of its own (before kernelevolve.pysource, ast.parse in two threads at once
    # now and then failed a proposal on Python 3.11: CPython gh-106905).
    assert outcome.nodes == 10 and outcome.unique == 10
    assert outcome.ref < outcome.best <= 1.0  # better than the reference CONFIG, never past the optimum
    sim.main(["1", "6"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("seed 0: nodes 6 unique ") and " ref " in lines[0] and lines[1].startswith("mean ")
