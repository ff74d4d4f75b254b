"""The roofline line: peaks from the hardware document (measured where it has them, else the
datasheet), fractions from the spec's bytes/flops, and the bound classification."""

import pytest

from kernelevolve.paths import REPO_ROOT
from kernelevolve.profiling.roofline import peaks, roofline
from kernelevolve.spec import Case, load_spec


def test_measured_peaks_are_preferred_and_datasheet_is_the_fallback():
    assert peaks("h200") == (4249.0, 695.0, "measured")  # knowledge_base/hardware/h200.md front matter
    gb, tf, source = peaks("h100")
    assert source == "datasheet" and gb > 1000 and tf > 100
    assert peaks("no-such-gpu") == (None, None, "none")


def test_softmax_at_one_shape_reads_as_memory_bound_with_the_spec_bytes():
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    case = Case(params={"M": 32768, "N": 4096}, dtype="bfloat16")
    nbytes, flops = spec.roofline(case)  # 2*M*N*2 bytes, 5*M*N flops
    r = roofline(0.08, "benchmark", nbytes, flops, spec.hardware)
    assert r.gbps == pytest.approx(2 * 32768 * 4096 * 2 / 0.08e-3 / 1e9)
    assert r.memory_fraction == pytest.approx(r.gbps / 4249)
    assert r.bound == "memory" and r.fraction == r.memory_fraction
    assert r.line().startswith("roofline: 0.0800 ms (benchmark), 6711 GB/s = 158% of 4249")
    assert r.line().endswith("(measured peaks); memory-bound")


@pytest.mark.parametrize(
    "ms,nbytes,flops,bound",
    [
        (1.0, 3.0e9, 1e9, "memory"),  # 3000 GB/s: 71% of the copy bandwidth
        (1.0, 1e8, 6.0e11, "compute"),  # 600 TFLOP/s: 86% of the matmul peak
        (1.0, 1e8, 1e9, "latency"),  # far from both roofs
        (1.0, None, None, "unknown"),  # the spec gives neither bytes nor flops
    ],
)
def test_bound_classification(ms, nbytes, flops, bound):
    assert roofline(ms, "ncu", nbytes, flops, "h200").bound == bound
