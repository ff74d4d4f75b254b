"""Kernel languages: detection from a candidate's source (Triton, CuTe DSL, Gluon; the Gluon cases are
the knowledge base's own Gluon kernels), the spec's `languages` field, prompts per language, and the
evaluator's language verdicts (a language the spec does not allow, a CuTe DSL or Gluon candidate under
the CPU interpreter) through the real evaluator and command line."""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.languages import LANGUAGES, allows, detect, gate
from kernelevolve.operators.base import OperatorContext
from kernelevolve.operators.context_builder import PromptBuilder
from kernelevolve.spec import SpecError, load_spec
from kernelevolve.views import verdict

ROOT = Path(__file__).resolve().parents[1]

CUTE_CANDIDATE = """
import torch
import torch.nn as nn
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def scale(g_in: cute.Tensor, g_out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    g_out[tidx] = g_in[tidx]


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        return out
"""


def _spec(languages: list[str] | None = None):
    """The softmax spec allowing `languages` (default: Triton only, the default of a spec)."""
    return load_spec(ROOT / "specs" / "softmax.yaml").model_copy(update={"languages": languages or ["triton"]})


# -- detection ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source, label, language",
    [
        ("import triton\nimport triton.language as tl\n", "triton", "triton"),
        ("import cutlass.cute as cute\n", "cute", "cute"),
        ("from cutlass import cute\nfrom cutlass.cute.runtime import from_dlpack\n", "cute", "cute"),
        ("import torch\nimport cutlass\nimport triton\n", "triton+cute", None),
        ("import torch\nfrom _row_io import row_plan\n", "none", None),
        ("import cutlass_helpers\nimport tritonish\n", "none", None),  # names that merely start alike
        ("def broken(:\n", "none", None),
    ],
)
def test_detect_reads_the_language_from_imports(source, label, language):
    found = detect(source)
    assert (found.label, found.language) == (label, language)


# The knowledge base's Gluon kernels (the fastest attention kernels on Hopper) and the Triton modules that
# call them: a module importing a Gluon helper module is still a Triton module.
GLUON_FILES = ["_hopper_gluon", "_flash_hopper", "_flash_hopper_ws", "_flash_hopper_softmax", "_decode_hopper"]
GLUON_CALLERS = ["flash_attention", "int8_mqa_decode", "ikbo_target_attention"]


@pytest.mark.parametrize("kernel", GLUON_FILES + GLUON_CALLERS)
def test_the_knowledge_bases_gluon_kernels_are_gluon(kernel):
    source = (ROOT / "knowledge_base" / "kernels" / f"{kernel}.py").read_text()
    found = detect(source)
    if kernel in GLUON_FILES:
        # e.g. _flash_hopper.py: `import triton` (for triton.cdiv) beside `from triton.experimental import gluon`
        assert (found.label, found.describe()) == ("gluon", "written in Gluon")
    else:
        assert found.label == "triton"


@pytest.mark.parametrize(
    "source, label",
    [
        ("import triton\nfrom triton.experimental import gluon\n", "gluon"),
        ("import triton.experimental.gluon.language as gl\n", "gluon"),
        ("import triton.experimental.gluon\n", "gluon"),
        ("from triton.experimental import gluon\nimport triton.language as tl\n", "triton+gluon"),
        # a Triton kernel beside a Gluon one: the decorator is the Triton evidence (`import triton` is not)
        ("import triton\nfrom triton.experimental import gluon\n\n@triton.jit\ndef k(x):\n    pass\n", "triton+gluon"),
        ("from triton import jit\n\n@jit\ndef k(x):\n    pass\n", "triton"),
        ("import triton.experimental\n", "triton"),  # the package holding Gluon, no Gluon in it
        ("from .triton.experimental import gluon\n", "none"),  # a relative import is the candidate's own
    ],
)
def test_detect_tells_gluon_from_triton(source, label):
    assert detect(source).label == label


def test_detection_says_when_ambiguous_or_absent():
    assert "several kernel languages (Triton, CuTe DSL)" in detect("import triton\nimport cutlass\n").describe()
    assert detect("import torch\n").describe().startswith("imports no kernel language")
    assert detect("import cutlass\n").describe() == "written in CuTe DSL"


# -- the spec's field ---------------------------------------------------------------------
def _write_spec(tmp_path: Path, languages_line: str) -> Path:
    (tmp_path / "softmax.py").write_text((ROOT / "specs" / "softmax.py").read_text())
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nreference: softmax.py\n{languages_line}")
    return path


def test_spec_languages_default_and_validation(tmp_path):
    assert load_spec(_write_spec(tmp_path, "")).languages == ["triton"]
    assert load_spec(_write_spec(tmp_path, "languages: [triton, cute]\n")).languages == ["triton", "cute"]
    with pytest.raises(SpecError) as bad:
        load_spec(_write_spec(tmp_path, "languages: [triton, cuda]\n"))
    message = str(bad.value)
    assert "\n" not in message and "field `languages`" in message and "unknown language 'cuda'" in message
    assert "triton, cute" in message
    with pytest.raises(SpecError, match="needs at least one language"):
        load_spec(_write_spec(tmp_path, "languages: []\n"))


def test_bad_languages_field_is_one_line_exit_2(tmp_path):
    path = _write_spec(tmp_path, "languages: [cuda]\n")
    run = subprocess.run(
        [sys.executable, "-m", "kernelevolve", "eval", str(path), str(ROOT / "knowledge_base/kernels/softmax.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "unknown language 'cuda'" in run.stderr and "Traceback" not in run.stderr + run.stdout


# -- prompts ------------------------------------------------------------------------------
def _draft(spec, device: str) -> str:
    context = OperatorContext(spec=spec, run_id="r", device=device, rng=random.Random(0))
    return PromptBuilder(token_budget=60000).draft(spec, context).prompt


def test_prompts_per_language():
    triton_only = _draft(_spec(), "cuda")
    assert "Triton kernels (`@triton.jit`)" in triton_only and "Kernel languages:" not in triton_only
    assert "cute" not in triton_only.lower() and "## Triton constraints to respect" in triton_only
    both = _draft(_spec(["triton", "cute"]), "cuda")
    assert "Kernel languages:" in both and "ONE of these languages" in both
    assert "CuTe DSL (the nvidia-cutlass-dsl package)" in both and "cute.compile" in both
    assert "computing them with kernels in an allowed language" in both
    # The CuTe DSL documents of the knowledge base come with it, and the Triton ones stay.
    refs = set(re.findall(r"\((constraints|guidance|kernels)/(\w+)\)", both))
    assert {("constraints", "cute_jit_caching"), ("kernels", "softmax")} <= refs
    assert any(k == "constraints" and not n.startswith("cute_") for k, n in refs)  # Triton's too
    assert any(k == "guidance" and n.startswith("cute_") for k, n in refs)
    on_cpu = _draft(_spec(["triton", "cute"]), "interpret")
    assert "CuTe DSL candidates cannot run" in on_cpu and "write Triton" in on_cpu


# -- the evaluator's verdicts -------------------------------------------------------------
def test_gate_needs_gpu_only_under_the_interpreter():
    assert gate(CUTE_CANDIDATE, ["triton", "cute"], "cuda").failure is None
    assert str(gate(CUTE_CANDIDATE, ["triton", "cute"], "interpret").failure) == "needs_gpu"
    assert gate("import triton\n", ["cute"], "cuda").failure is not None  # Triton refused where only CuTe is allowed


def test_gluon_is_allowed_where_triton_is_and_needs_a_gpu():
    """Gluon ships inside Triton: a spec allowing Triton allows it (as before it had a name), a spec of
    CuTe DSL only does not; under the CPU interpreter, where Gluon cannot run, it is not run."""
    source = (ROOT / "knowledge_base/kernels/_hopper_gluon.py").read_text()
    assert allows(["triton"], "gluon") and allows(["gluon"], "gluon") and not allows(["cute"], "gluon")
    assert not allows(["gluon"], "triton") and LANGUAGES["gluon"].title == "Gluon"
    assert gate(source, ["triton"], "cuda") == gate(source, ["gluon"], "cuda")
    assert gate(source, ["triton"], "cuda").failure is None and gate(source, ["triton"], "cuda").language == "gluon"
    on_cpu = gate(source, ["triton"], "interpret")
    assert str(on_cpu.failure) == "needs_gpu" and on_cpu.message.startswith("needs a GPU: Gluon kernels cannot run")
    refused = gate(source, ["cute"], "cuda")
    assert str(refused.failure) == "not_a_kernel"
    assert refused.message.startswith("the candidate is written in Gluon (it imports triton.experimental.gluon)")


def test_cute_candidate_under_the_interpreter_is_not_run_not_failed():
    result = Evaluator(device="interpret").evaluate(_spec(["triton", "cute"]), CUTE_CANDIDATE)
    assert result.failure == "needs_gpu" and not result.correct
    assert result.message.startswith("needs a GPU: CuTe DSL kernels cannot run under the CPU interpreter")
    assert "not a fault of the kernel" in result.message and "--device cuda" in result.message
    assert not result.phases_s  # nothing was started
    assert [s.correct for s in result.shapes] == [None] * len(result.shapes)
    assert verdict(result.correct, result.failure) == "not run (needs a GPU)"


def test_disallowed_language_is_a_failed_verdict():
    result = Evaluator(device="interpret").evaluate(_spec(), CUTE_CANDIDATE)
    assert result.failure == "not_a_kernel" and not result.correct
    assert "written in CuTe DSL (it imports cutlass)" in result.message
    assert "its `languages` field allows Triton" in result.message


GLUON_CANDIDATE = """
import torch
import torch.nn as nn
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    cols = gl.arange(0, BLOCK, layout=layout)
    mask = cols < n_cols
    x = gl.load(x_ptr + gl.program_id(0) * n_cols + cols, mask=mask, other=-float("inf")).to(gl.float32)
    e = gl.exp(x - gl.max(x, axis=0))
    gl.store(y_ptr + gl.program_id(0) * n_cols + cols, e / gl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _softmax_rows[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""


def test_gluon_candidate_under_the_interpreter_is_not_run_not_failed():
    """A Gluon softmax for the softmax spec (which names Triton and CuTe DSL): let through, and under the
    CPU interpreter, which cannot run Gluon, not run rather than failed."""
    result = Evaluator(device="interpret").evaluate(_spec(), GLUON_CANDIDATE)
    assert result.failure == "needs_gpu" and not result.correct, result.message
    assert result.message.startswith("needs a GPU: Gluon kernels cannot run under the CPU interpreter")
    assert not result.phases_s
    assert verdict(result.correct, result.failure) == "not run (needs a GPU)"
    refused = Evaluator(device="interpret").evaluate(_spec(["cute"]), GLUON_CANDIDATE)
    assert refused.failure == "not_a_kernel" and "written in Gluon" in refused.message


def test_spec_may_name_gluon_and_its_prompt_says_how_to_write_it(tmp_path):
    assert load_spec(_write_spec(tmp_path, "languages: [triton, gluon]\n")).languages == ["triton", "gluon"]
    prompt = _draft(_spec(["triton", "gluon"]), "cuda")
    assert "ONE of these languages" in prompt and "Gluon (Triton's lower-level language" in prompt
    assert "@gluon.jit" in prompt
    assert "Gluon candidates cannot run" in _draft(_spec(["triton", "gluon"]), "interpret")


def test_eval_command_says_needs_a_gpu(tmp_path):
    spec = _write_spec(tmp_path, "languages: [triton, cute]\n")
    candidate = tmp_path / "cute_candidate.py"
    candidate.write_text(CUTE_CANDIDATE)
    args = [sys.executable, "-m", "kernelevolve", "eval", str(spec), str(candidate), "--device", "interpret"]
    run = subprocess.run([*args, "--no-preflight"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "result: not run (needs a GPU)" in run.stdout and "failed" not in run.stdout
    assert "needs a GPU: CuTe DSL kernels cannot run" in " ".join(run.stdout.split())
    assert "sandbox" not in run.stderr  # nothing ran, so no sandbox warning


# -- the kernel-language check of the harness ---------------------------------------------
def test_monitor_counts_a_cute_launch(monkeypatch, tmp_path):
    """A CuTe DSL compiled function called inside the monitor is a kernel launch. Compiled here on the
    CPU (for sm_90a); the call itself fails without a GPU, after the monitor saw it."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    import torch

    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack

    from kernelevolve.harness.runtime.kernel_monitor import KernelMonitor

    launch = _cute_module(tmp_path).launch
    x, y = torch.randn(32), torch.empty(32)
    compiled = cute.compile(launch, from_dlpack(x), from_dlpack(y))
    monitor = KernelMonitor()
    from cutlass.base_dsl.common import DSLBaseError

    with pytest.raises(DSLBaseError):  # no GPU here: the launch itself fails
        with monitor:
            compiled(from_dlpack(x), from_dlpack(y))
    # The launch is named by the device kernel (what the profiler sees), and from_dlpack is glue.
    assert list(monitor.launches) == list(compiled.kernel_info) and not monitor.compute_ops
    assert next(iter(monitor.launches)).startswith("kernel_cutlass_double")
    assert sum(monitor.launches.values()) == 1
    assert monitor.verdict() is None
    idle = KernelMonitor()
    with idle:
        from_dlpack(x)
    assert idle.verdict().startswith("forward launched no")


def test_monitor_counts_a_gluon_launch(tmp_path):
    """A Gluon kernel is launched by Triton's runtime (its JIT function is Triton's), so the launch monitor
    counts it as it counts a Triton kernel. Without a GPU the launch fails after the monitor saw it."""
    import importlib.util

    import torch

    from kernelevolve.harness.runtime.kernel_monitor import KernelMonitor

    path = tmp_path / "gluon_softmax.py"  # a module file, as a candidate is: the JIT reads its source
    path.write_text(GLUON_CANDIDATE)
    spec = importlib.util.spec_from_file_location("gluon_softmax", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, monitor = torch.randn(4, 100), KernelMonitor()
    with pytest.raises(RuntimeError, match="active drivers"):  # no GPU here
        with monitor:
            module.ModelNew()(x)
    assert monitor.launches == {"_softmax_rows": 1} and not monitor.compute_ops
    assert monitor.verdict() is None


CUTE_DOUBLE = """
import cutlass.cute as cute


@cute.kernel
def double(g_in: cute.Tensor, g_out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    g_out[tidx] = g_in[tidx] * 2.0


@cute.jit
def launch(a: cute.Tensor, b: cute.Tensor):
    double(a, b).launch(grid=(1, 1, 1), block=(32, 1, 1))
"""


def _cute_module(folder: Path):
    """A module file, as a candidate is: the DSL reads its kernels' source and annotations from it."""
    import importlib.util

    path = folder / "cute_double.py"
    path.write_text(CUTE_DOUBLE)
    spec = importlib.util.spec_from_file_location("cute_double", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- show -----------------------------------------------------------------------------------
def test_show_gives_each_node_its_language(tmp_path):
    """A run holding a timed Triton node, a timed CuTe DSL node, and a CuTe and a Gluon node not run on the CPU:
    `show` adds a language column and says `not run (needs a GPU)`; `show --json` has each language."""
    from kernelevolve.evaluation.result import EvalResult, ShapeResult
    from kernelevolve.memory import Repository
    from kernelevolve.search.graph import Node

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    repo = Repository(url)
    spec = _spec(["triton", "cute"])
    run_id = repo.create_run(
        spec=spec, policy="greedy", device="cuda", settings={}, rng_state={}, policy_state={}, snapshot=""
    )
    triton_source = (ROOT / "knowledge_base/kernels/softmax.py").read_text()
    cute_source = (ROOT / "knowledge_base/kernels/softmax_cute.py").read_text()

    def timed(ms: float) -> EvalResult:
        shape = ShapeResult(label="M=4,N=256 bfloat16", params={}, dtype="bfloat16", correct=True)
        shape.latency_ms, shape.baseline_ms = ms, 1.0
        return EvalResult(correct=True, device="cuda", timed=True, shapes=[shape])

    evaluations = [
        (triton_source, timed(0.5)),
        (cute_source, timed(0.4)),
        (CUTE_CANDIDATE, Evaluator(device="interpret").evaluate(spec, CUTE_CANDIDATE)),
        (GLUON_CANDIDATE, Evaluator(device="interpret").evaluate(spec, GLUON_CANDIDATE)),
    ]
    for i, (source, result) in enumerate(evaluations):
        repo.add_node(run_id, Node(id=i, source=source, note=f"node {i}"), rng_state={}, elapsed_s=0.0)
        repo.record_evaluation(run_id, i, result, policy_state={}, rng_state={}, elapsed_s=0.0)
    repo.close()

    def show(*extra: str) -> str:
        args = [sys.executable, "-m", "kernelevolve", "show", run_id, "--db", url, *extra]
        run = subprocess.run(
            args, capture_output=True, text=True, cwd=tmp_path, timeout=120, env={**os.environ, "COLUMNS": "100"}
        )
        assert run.returncode == 0, run.stderr
        return run.stdout

    as_json = json.loads(show("--json"))
    assert [n["language"] for n in as_json["nodes"]] == ["triton", "cute", "cute", "gluon"]
    assert as_json["nodes"][2]["failure"] == as_json["nodes"][3]["failure"] == "needs_gpu"
    text = show()
    assert "language" in text and "#2 draft: not run: needs a GPU" in text and "#3 draft: not run: needs a GPU" in text
    best = text[text.index("best nodes:") :]
    assert " cute " in best and " triton " in best and "2.500x" in best


def test_offline_search_tunes_the_cute_kernel_given_by_kernel_and_resume_keeps_it(tmp_path):
    """`run --kernel softmax_cute`: the offline operator drafts the CuTe DSL kernel, then moves its CONFIG;
    under the CPU interpreter every node is `not run (needs a GPU)`, never a failure; resume keeps --kernel."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {**os.environ, "KERNELEVOLVE_CACHE_DIR": str(tmp_path / "cache")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "kernelevolve", *args, "--db", db]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)

    spec = str(ROOT / "specs" / "softmax.yaml")
    run = cli("run", spec, "--kernel", "softmax_cute", "--device", "interpret", "--budget", "2", "--no-preflight")
    assert run.returncode == 1 and "no correct kernel found" in run.stdout + run.stderr, run.stderr
    run_id = json.loads(cli("runs", "--json").stdout)[0]["id"]
    resumed = cli("resume", run_id, "--budget", "3")
    assert resumed.returncode == 1, resumed.stderr
    nodes = json.loads(cli("show", run_id, "--json").stdout)["nodes"]
    assert [n["language"] for n in nodes] == ["cute"] * 3
    assert [n["failure"] for n in nodes] == ["needs_gpu"] * 3
    assert nodes[0]["note"] == "reference kernel softmax_cute with its own CONFIG"
    assert all("another configuration" in n["note"] for n in nodes[1:])
    assert len({n["note"] for n in nodes}) == 3  # three different configurations

    refused = cli("run", str(ROOT / "specs" / "conv1d.yaml"), "--kernel", "softmax_cute", "--device", "interpret")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "written in CuTe DSL, which spec 'conv1d' does not allow" in refused.stderr
