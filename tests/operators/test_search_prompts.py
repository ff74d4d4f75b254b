"""What a search asks the model: the evaluator's contract in the first prompt, drafts that
differ, improve prompts that ask only about data they hold, a KernelBench problem with a tuple size
constant reaching the model, and an exception inside the operator recorded as the tool's failure.

The searches are real `kernelevolve run` processes on the CPU interpreter; the model is the scripted
local server (tests/llm/fake_llm_server.py) answering through the OpenAI SDK.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelevolve.memory.repository import Repository
from tests.cli.console import kernelevolve_in_process
from tests.llm.fake_llm_server import FakeLLMServer

PROBLEMS = Path(__file__).parent / "problems"
CUMSUM = PROBLEMS / "cumsum.py"
LLM_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KERNELEVOLVE_MODEL",
    "KERNELEVOLVE_PRICE",
    "KERNELEVOLVE_DB",
    "KERNELEVOLVE_REPLY_CACHE",
    "KERNELEVOLVE_DEBUG",
)

# A correct inclusive scan along the last dimension: one program per row, a carry across blocks.
CUMSUM_KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cumsum_rows(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.sum(tl.zeros([BLOCK], dtype=tl.float32), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        ok = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=ok, other=0.0).to(tl.float32)
        y = tl.cumsum(x, axis=0) + carry
        tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        n = x.shape[-1]
        y = torch.empty_like(x)
        _cumsum_rows[(x.numel() // n,)](x, y, n, BLOCK=32)
        return y
"""


def _env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"), KERNELEVOLVE_LLM_INSIGHTS="0", **extra)
    return env


def _cli(args, env, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _in_process(args, env, cwd, monkeypatch):
    return kernelevolve_in_process(args, monkeypatch, env, cwd, unset=LLM_ENV)


def _reply(api, prompt, body):
    return 200, f"Change: one program per row, a carry across blocks\n\n```python\n{CUMSUM_KERNEL}```\n", {}


@pytest.mark.timeout(400)
def test_a_kernelbench_cumsum_search_reaches_the_model_with_the_contract_and_distinct_drafts(tmp_path, monkeypatch):
    """Was: `input_shape = (32768,)` crashed the prompt (`unhashable type: 'list'`) before any model
    call, charged to the model as no_code; drafts got byte-identical prompts with no contract."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with FakeLLMServer(_reply) as server:
        env = dict(
            OPENAI_BASE_URL=server.url + "/v1",
            KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"),
            KERNELEVOLVE_LLM_INSIGHTS="0",
        )
        args = ["run", str(CUMSUM), "--model", "openai:local-coder", "--device", "interpret", "--db", db]
        args += ["--budget", "3", "--drafts", "2", "--parallel", "1", "--no-model-check", "--no-preflight"]
        proc = _in_process([*args, "--shape", "batch_size=4,input_shape=(80,)"], env, tmp_path, monkeypatch)
        prompts = [r.prompt for r in server.requests if r.prompt.startswith("# Task:")]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 nodes, 3 correct" in proc.stdout, proc.stdout  # the model's kernel, evaluated at every node
    assert len(prompts) == 3
    drafts, improve = prompts[:2], prompts[2]

    # The contract, once in every prompt, with this problem's own settings.
    for prompt in prompts:
        assert prompt.count("## How the evaluator checks a candidate") == 1
        assert "correctness only (given with --shape): batch_size=4, input_shape=(80,), dim=1" in prompt
        assert "so tune for these: batch_size=32768, input_shape=(32768,), dim=1" in prompt
        assert "each of 3 trials" in prompt and "4 more times on two input buffers" in prompt
        assert (
            "torch.empty, torch.empty_like, torch.empty_strided, Tensor.new_empty return memory filled with NaN"
            in prompt
        )
        assert "||out - ref||_2 <= norm*||ref||_2" in prompt and "native: atol 0.001, rtol 0.001, norm 0.001" in prompt
        assert 'input_precision="ieee"' in prompt and "runs in float64" in prompt
        assert "inputs must be unchanged after forward" in prompt and "torch only as glue" in prompt
        assert "scan (the reference calls torch.cumsum)" in prompt  # the family read from the reference

    # Drafts differ: each its own approach, the second told what the first did.
    assert drafts[0] != drafts[1]
    approaches = [re.search(r"take this approach: (.+?)\.\n", p).group(1) for p in drafts]
    assert approaches[0] != approaches[1] and "draft 1 of this search" in drafts[0] and "draft 2" in drafts[1]
    assert "Earlier drafts of this search" not in drafts[0]
    # The engine proposes ahead of its evaluator: the second draft may be asked before the first is evaluated,
    # and then has no earlier draft to be told of; when it has one, it is told what it did.
    if "## Earlier drafts of this search" in drafts[1]:
        earlier = drafts[1].split("## Earlier drafts of this search")[1].split("\n## ")[0]
        assert "#0 draft (one program per row, a carry across blocks): correct (untimed)" in earlier

    # The improve prompt of an untimed parent asks for no timings it does not have.
    assert "# Task: make a correct Triton kernel" in improve
    assert "study the per-shape timings" not in improve and "it has not been timed" in improve

    # Every prompt says which documents it carried and why; none of attention's.
    for prompt in prompts:
        line = next(ln for ln in prompt.splitlines() if ln.startswith("Knowledge-base documents below"))
        assert "(target GPU)" in line or "general" in line or "family" in line
        assert "attention" not in line, line
        assert len(prompt) <= 24_000, len(prompt)

    repo = Repository(db)
    run_id = repo.runs()[0].id
    assert [n.failure for n in repo.load_graph(run_id).nodes()] == [None, None, None]
    # What `show --node` can list: the documents node 0's prompt carried, and why.
    from kernelevolve.operators.context_builder import carried_documents, node_documents

    assert node_documents(repo, run_id, 0) == carried_documents(drafts[0]) != []
    assert node_documents(repo, run_id, 0)[0]["why"].startswith("kin family reduction")  # no scan documents yet


BROKEN_OPERATOR = """
from kernelevolve.operators.base import BaseOperator


class Broken(BaseOperator):
    name = "broken"

    def draft(self, spec, context):
        return {[spec.name]: 1}  # a bug in the tool: TypeError: unhashable type: 'list'

    def improve(self, parents, context):
        return self.draft(context.spec, context)
"""


@pytest.mark.timeout(200)
@pytest.mark.parametrize("debug", [False, True])
def test_an_exception_in_the_operator_is_the_tools_failure_with_its_traceback(tmp_path, debug):
    plugin = tmp_path / "broken.py"
    plugin.write_text(BROKEN_OPERATOR)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    env = _env(tmp_path, **({"KERNELEVOLVE_DEBUG": "1"} if debug else {}))
    args = ["run", str(CUMSUM), "--model", f"plugin:{plugin}:Broken", "--device", "interpret", "--db", db]
    proc = _cli([*args, "--budget", "5", "--no-preflight", "--shape", "batch_size=4,input_shape=(80,)"], env, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "finished: operator_error" in proc.stdout
    assert "failed (operator): operator error: TypeError: unhashable type: 'list'" in proc.stdout
    assert "no_code" not in proc.stdout
    # The traceback (where in the tool it broke) on stderr only under KERNELEVOLVE_DEBUG=1.
    assert ("Traceback (most recent call last)" in proc.stderr) is debug
    assert ('broken.py", line 9, in draft' in proc.stderr) is debug

    repo = Repository(db)
    run = repo.runs()[0]
    nodes = repo.load_graph(run.id).nodes()
    assert len(nodes) == 3 and {n.failure for n in nodes} == {"operator"}
    assert 'broken.py", line 9, in draft' in nodes[0].evaluation.log  # kept with the node either way
    assert repo.insights() == []  # nothing about the tool's failure reaches a later prompt
    # `show` reads the same (in process: it only reads the database, start-up would be most of its time).
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    shown = json.loads(CliRunner().invoke(app, ["show", run.id, "--db", db, "--json"]).stdout)
    assert {n["failure"] for n in shown["nodes"]} == {"operator"}


def _operator(monkeypatch, server):
    from kernelevolve.llm.providers import OpenAIProvider
    from kernelevolve.operators.llm_operator import LLMOperator

    for var in LLM_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    return LLMOperator(OpenAIProvider("local-coder"), llm_insights=True)


def _context(spec, evaluated=()):
    import random

    from kernelevolve.operators.base import OperatorContext

    return OperatorContext(spec=spec, run_id="r-1", device="interpret", rng=random.Random(0), evaluated=list(evaluated))


def test_drafts_asked_at_once_differ_and_a_resumed_run_counts_its_earlier_drafts(monkeypatch, tmp_path):
    from kernelevolve.evaluation.result import EvalResult
    from kernelevolve.operators.base import ParentView
    from kernelevolve.spec import load_spec

    spec = load_spec(PROBLEMS / "layer_norm.py")
    with FakeLLMServer(_reply) as server:
        op = _operator(monkeypatch, server)
        for _ in range(3):  # proposed together: none evaluated yet, same context
            op.draft(spec, _context(spec))
        done = [ParentView(i, "x = 1\n", "draft", EvalResult(correct=True), note=f"draft idea {i}") for i in range(2)]
        _operator(monkeypatch, server).draft(spec, _context(spec, done))  # a resumed run's third draft
        prompts = [r.prompt for r in server.requests]
    assert len(set(prompts)) == 4
    assert [re.search(r"This is draft (\d+)", p).group(1) for p in prompts] == ["1", "2", "3", "3"]
    assert len({re.search(r"take this approach: (.+?)\.\n", p).group(1) for p in prompts[:3]}) == 3
    assert "#0 draft (draft idea 0): correct (untimed)" in prompts[3] and "#1 draft (draft idea 1)" in prompts[3]


def test_a_node_the_tool_failed_is_drafted_anew_and_leaves_no_insight(monkeypatch):
    from kernelevolve.evaluation.result import EvalResult, Failure
    from kernelevolve.operators.base import ParentView
    from kernelevolve.spec import load_spec

    spec = load_spec(PROBLEMS / "cumsum.py")
    broken = ParentView(0, None, "draft", EvalResult.failed(Failure.OPERATOR, "operator error: TypeError: boom"))
    with FakeLLMServer(_reply) as server:
        op = _operator(monkeypatch, server)
        proposal = op.improve([broken], _context(spec))
        assert op.write_insight(spec, broken, []) is None  # no model call, no rule-based text
        prompts = [r.prompt for r in server.requests]
    assert len(prompts) == 1 and prompts[0].startswith("# Task: write a fast Triton kernel")  # a draft, not a debug
    assert "TypeError: boom" not in prompts[0] and proposal.source is not None
