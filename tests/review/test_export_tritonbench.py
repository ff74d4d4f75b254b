"""`kernelevolve export RUN NODE -o DIR --tritonbench`: an approved node of a real run as a
TritonBench operator package, refused for a node nobody approved."""

import importlib
import sys
from pathlib import Path

from tests.review.conftest import copy_of, kernelevolve

STANDIN = Path(__file__).parents[1] / "profiling" / "tritonbench_standin"  # TritonBench is not on PyPI


def test_an_approved_node_exports_as_a_tritonbench_operator(real_run, tmp_path, monkeypatch):
    where, _, run_id = real_run
    from kernelevolve.memory import Repository
    from kernelevolve.review import review

    db = copy_of(real_run, tmp_path)
    repo = Repository(db)
    node = next(n for n in repo.load_graph(run_id).nodes() if n.correct)
    refused = kernelevolve(
        "export", run_id, str(node.id), "-o", str(tmp_path / "refused"), "--tritonbench", "--db", db, cwd=where
    )
    assert (
        refused.returncode == 2 and "has not been reviewed" in refused.stderr and len(refused.stderr.splitlines()) == 1
    )
    assert not (tmp_path / "refused").exists()
    review(repo, run_id, node.id, "approve", reviewer="ada")
    folder = tmp_path / "ke_softmax_tb"
    done = kernelevolve("export", run_id, str(node.id), "-o", str(folder), "--tritonbench", "--db", db, cwd=where)
    assert done.returncode == 0, done.stderr
    assert node.source in (folder / "kernel.py").read_text()  # the node's own kernel, with its provenance header
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("ke_softmax_tb")
        registered = importlib.import_module("tritonbench.utils.triton_op").REGISTERED
        assert {"kernelevolve", "torch_eager", "torch_compile"} <= set(registered)
    finally:
        for name in [m for m in sys.modules if m.startswith(("ke_softmax_tb", "tritonbench"))]:
            del sys.modules[name]
    both = kernelevolve(
        "export", run_id, str(node.id), "-o", str(folder), "--tritonbench", "--as-op", "a::b", "--db", db, cwd=where
    )
    assert both.returncode == 2 and "give one of them" in both.stderr
