"""The TritonBench operator package written for a kernel: the spec's shapes as inputs (module
constants set per shape), the spec's baseline marked as TritonBench's, the candidate computing
what the reference computes. Driven here through a stand-in for TritonBench's base class (it is
not on PyPI), on the CPU interpreter."""

import importlib
import sys
from argparse import Namespace
from pathlib import Path

import torch

from kernelevolve.harness.tritonbench import write_operator
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from kernelevolve.spec import load_spec

STANDIN = Path(__file__).parent / "tritonbench_standin"


def test_operator_package_iterates_the_spec_shapes_and_its_kernel_matches_the_reference(tmp_path, monkeypatch):
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    shapes = [{"M": 4, "N": 256}, {"M": 3, "N": 1000}]
    path = write_operator(
        spec, (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text(), tmp_path / "ke_softmax", shapes=shapes
    )
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "__init__.py",
        "_bf16_pairs.py",
        "_launch_heuristics.py",
        "_row_io.py",
        "_row_models.py",
        "kernel.py",
        "operator.py",
        "reference.py",
    ]
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    triton_op = importlib.import_module("tritonbench.utils.triton_op")
    package = importlib.import_module("ke_softmax")
    try:
        assert triton_op.REGISTERED["torch_compile"]["baseline"] is True  # the spec's baseline: torch.compile
        assert triton_op.REGISTERED["torch_eager"]["baseline"] is False
        assert "kernelevolve" in triton_op.REGISTERED and "gbps" in triton_op.METRICS
        op = package.Operator(Namespace(device="cpu"))
        seen = []
        for example in op.get_input_iter():
            (x,) = example[1:]
            seen.append((op.get_x_val(example), tuple(x.shape), x.dtype))
            expected = op.torch_eager(*example)()
            got = op.kernelevolve(*example)()
            torch.testing.assert_close(got.float(), expected.float(), atol=1e-7, rtol=1e-2)
        assert seen == [
            ("M=4,N=256 bfloat16", (4, 256), torch.bfloat16),
            ("M=3,N=1000 bfloat16", (3, 1000), torch.bfloat16),
        ]
        metrics = triton_op.BenchmarkOperatorMetrics(latency=0.001)
        assert op.gbps("kernelevolve", (1,), metrics) == 2 * 3 * 1000 * 2 / 0.001 / 1e6
    finally:
        for name in [m for m in sys.modules if m.startswith(("ke_softmax", "tritonbench"))]:
            del sys.modules[name]
