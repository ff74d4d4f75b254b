"""The profiling templates render for a candidate; the torch.profiler harness runs for real in the
evaluation sandbox under the interpreter and leaves a trace the parser reads; the GPU-only tools
say in one line what they lack."""

import ast

import pytest

from kernelevolve.harness import available_tools, render
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from kernelevolve.profiling.collect import profile_candidate
from kernelevolve.profiling.runner import run_tool, scratch_dir
from kernelevolve.spec import load_spec

SPEC = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
KERNEL = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()


def test_every_template_renders_for_a_candidate_as_python():
    config = {
        "device": "cuda",
        "candidate_path": "/x/candidate.py",
        "reference_path": "/x/reference.py",
        "result_path": "/x/result.json",
        "output_dir": "/x",
        "cases": [
            {
                "label": "M=4,N=256 bfloat16",
                "params": {"M": 4, "N": 256},
                "dtype": "bfloat16",
                "constants": {"M": 4, "N": 256},
                "bytes": 4096.0,
            }
        ],
        "seed": 1,
        "calls": 3,
        "spec": "softmax",
        "name": "op",
        "baseline": "eager",
        "precision": "bf16",
    }
    tools = available_tools()
    assert {"profile", "tritonbench_operator"} <= set(tools)
    for tool in tools:
        ast.parse(render(tool, config), filename=f"{tool}.py")


def test_torch_profiler_harness_runs_in_the_sandbox_and_its_trace_parses():
    cases = SPEC.cases("interpret")
    (summary, second) = profile_candidate(SPEC, KERNEL, cases, ["torch"], device="interpret", timeout_s=120)
    assert summary.label == cases[0].label and second.label == cases[1].label
    assert summary.tools == ["torch"] and not summary.errors
    t = summary.parts["torch"]
    assert t.calls == 3
    assert t.kernels == [] and t.gpu_ms == 0  # the interpreter runs no GPU kernel
    assert t.host_ms > 0.1  # an interpreted Triton launch takes milliseconds of CPU
    assert t.allocated_bytes_per_call == 4 * 256 * 2  # the output, bf16, allocated once per call
    assert summary.roofline is None  # no GPU time: no roofline line
    assert "torch.profiler: 0 kernel launches per call" in summary.prompt_text()


@pytest.mark.parametrize("tool", ["ncu", "proton"])
def test_gpu_only_tools_say_what_they_lack_in_one_line(tool):
    run = run_tool(tool, SPEC, KERNEL, SPEC.cases("interpret")[:1], scratch_dir(), device="interpret", timeout_s=120)
    assert run.error and "\n" not in run.error
    assert "CUDA GPU" in run.error and run.outputs == {}


def test_one_ncu_report_splits_into_cases_at_the_marker_kernels():
    import csv
    import io

    from kernelevolve.harness.runtime.profile_ncu import MARKER, split_cases
    from kernelevolve.profiling.tools.ncu import parse_ncu_csv

    rows = list(csv.reader(io.StringIO((REPO_ROOT / "tests/profiling/fixtures/h200/ikbo_lce/ncu_0.csv").read_text())))
    name = rows[0].index("Kernel Name")
    marker = list(rows[2])
    marker[name] = MARKER
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(
        [rows[0], rows[1], marker, rows[2], rows[3], marker, rows[4]]
    )  # two cases: two launches, then one
    first, second = split_cases("==PROF== Disconnected from process 43\n" + out.getvalue(), 2)
    assert [k.name for k in parse_ncu_csv(first)] == ["_pad_weight_halves", "_compress_gemm"]
    whole = parse_ncu_csv((REPO_ROOT / "tests/profiling/fixtures/h200/ikbo_lce/ncu_0.csv").read_text())
    assert parse_ncu_csv(second) == whole[2:]
    with pytest.raises(ValueError, match="2 case markers for 3 cases"):
        split_cases(out.getvalue(), 3)
