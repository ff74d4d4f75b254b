"""`kernelevolve export RUN NODE -o k.py` writes one file that stands alone: the
knowledge base's helper modules the kernel imports are written into it, so `import k` works
anywhere with only torch and triton; a kernel whose helpers cannot go into one file is refused
with their list."""

import os
import subprocess
import sys

from kernelevolve.paths import KNOWLEDGE_BASE
from tests.review.conftest import kernelevolve


def _correct_node(db: str, run_id: str) -> int:
    from kernelevolve.memory import Repository

    graph = Repository(db).load_graph(run_id)
    return next(n.id for n in graph.nodes() if n.correct and not n.held)


def test_a_single_file_export_imports_and_computes_without_the_knowledge_base(tmp_path):
    """Was: `import k` -> No module named '_bf16_pairs'."""
    from tests.review.synthetic import write_synthetic_run

    db = f"sqlite:///{tmp_path / 's.db'}"
    run_id = write_synthetic_run(db, 4, seed=3)  # softmax nodes: the knowledge base's kernel, 4 helpers
    node = _correct_node(db, run_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = kernelevolve("export", run_id, str(node), "-o", "k.py", "--unreviewed", "--db", db, cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    text = (elsewhere / "k.py").read_text()
    assert text.startswith(f"# Exported by KernelEvolve from run {run_id}, node {node}")
    assert "from _bf16_pairs import" not in text and "from _row_io import" not in text
    for helper in ("_bf16_pairs", "_row_io", "_launch_heuristics", "_row_models"):
        assert f"# ---- from knowledge_base/kernels/{helper}.py ----" in text
    code = (
        "import sys, torch\n"
        "import k\n"
        "assert not [m for m in sys.modules if m in ('_bf16_pairs', '_row_io', '_launch_heuristics', '_row_models')]\n"
        "x = torch.randn(3, 1000)\n"
        "print(float((k.ModelNew()(x) - torch.softmax(x, -1)).abs().max()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRITON_INTERPRET"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert float(run.stdout) < 1e-5
    assert str(KNOWLEDGE_BASE) not in sys.path  # the import above could not have found the helpers there


def test_a_kernel_whose_helpers_cannot_go_into_one_file_is_refused_with_their_list():
    from kernelevolve.review import ReviewError
    from kernelevolve.review.export_op import standalone_source

    source = "# header\n\n" + (KNOWLEDGE_BASE / "kernels" / "flash_attention.py").read_text()
    try:
        standalone_source(source)
    except ReviewError as e:
        message = str(e)
    else:
        raise AssertionError("flash_attention imports _flash_hopper as a module: not one file")
    assert "_flash_hopper.py, _flash_hopper_softmax.py" in message and "import _flash_hopper" in message
    assert "--as-op" in message and "\n" not in message
    # a source without helpers comes back unchanged
    plain = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert standalone_source(plain) == plain
