"""A TritonBench operator package for a kernel: `write_operator(spec, source, folder)`.

TritonBench (github.com/meta-pytorch/tritonbench) finds operators as packages under
tritonbench/operators/<name>/ whose operator.py defines `Operator(BenchmarkOperator)`. The folder
written here is such a package: operator.py rendered from harness_templates/tritonbench_operator.py.j2
(eager, torch.compile and the candidate as benchmarks, the spec's baseline marked as TritonBench's
baseline, one input per spec shape, a GB/s metric from the spec's `bytes`), the spec's reference
module as reference.py and the candidate as kernel.py. Shapes are resolved here (all module
constants, derived ones included), so the package needs only torch, triton and TritonBench.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from kernelevolve import shapes as shapes_mod
from kernelevolve.harness import render
from kernelevolve.paths import kernel_helpers
from kernelevolve.spec import Spec, ShapeValue

PRECISIONS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}


def write_operator(
    spec: Spec, source: str, folder: Path, *, name: str | None = None, shapes: list[dict[str, ShapeValue]] | None = None
) -> Path:
    """Write the operator package into `folder` (created; files there are replaced); returns operator.py."""
    name = name or re.sub(r"\W", "_", f"kernelevolve_{spec.name}")
    cases = []
    for case in spec.cases("cuda", shapes):
        nbytes, _ = spec.roofline(case)
        cases.append(
            {
                "label": case.label,
                "dtype": case.dtype,
                "bytes": nbytes,
                "constants": shapes_mod.constants(spec.reference_source, case.params),
            }
        )
    config = {
        "spec": spec.name,
        "name": name,
        "baseline": spec.baseline,
        "cases": cases,
        "precision": PRECISIONS.get(spec.dtypes[0], "bypass"),
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(spec.reference, folder / "reference.py")
    (folder / "kernel.py").write_text(source)
    for helper in kernel_helpers(source):  # knowledge-base modules the kernel imports (launch heuristics...)
        shutil.copy(helper, folder / helper.name)
    (folder / "__init__.py").write_text("from .operator import Operator  # noqa: F401\n")
    path = folder / "operator.py"
    path.write_text(render("tritonbench_operator", config))
    return path
