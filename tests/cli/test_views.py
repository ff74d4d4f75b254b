"""What `runs` and `show` tell about model-driven runs: the model's
one-line summary of each change, the failure line of failed nodes, model / best / cost per run,
everything readable at 80 columns and in a file."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.memory import Repository
from kernelevolve.operators.base import LLMCallRecord
from kernelevolve.paths import REPO_ROOT
from kernelevolve.search.graph import Node
from kernelevolve.runs.session import RunSettings, start_run
from kernelevolve.spec import Budget
from kernelevolve.spec import load_spec
from tests.cli.console import kernelevolve_many, made_once

SOFTMAX = REPO_ROOT / "specs" / "softmax.yaml"
LONG_NOTE = "one program per row with an online max and sum, BLOCK_N the next power of two of N"
ERROR = (
    "operator error: OperatorError: openai:local-coder: gave up after 3 attempts: APIConnectionError: "
    "cannot reach http://127.0.0.1:9/v1/: [Errno 111] Connection refused"
)


def _untimed(correct=True, failure=None, message=""):
    shapes = [ShapeResult("M=4,N=256 bfloat16", {"M": 4, "N": 256}, "bfloat16", correct, failure, max_abs_err=1e-3)]
    if failure:
        return EvalResult.failed(Failure(failure), message, shapes=shapes)
    return EvalResult(correct=True, shapes=shapes)


def _db(tmp_path):
    url = f"sqlite:///{tmp_path / 'v.db'}"
    repo = Repository(url)
    settings = RunSettings(
        policy="greedy", limits=Budget(max_nodes=4), device="interpret", model="openai:local-coder", seed=1
    )
    run_id = start_run(repo, load_spec(SOFTMAX), settings)
    cost = {"tokens": 1500, "cost_usd": 0.0125}
    nodes = [
        (Node(0, (), "# k0", note=LONG_NOTE, **cost), _untimed()),
        (Node(1, (), None, note="draft"), _untimed(False, "no_code", ERROR)),
        (
            Node(2, (0,), "# k2", note="BLOCK_N 1024 -> 2048", **cost),
            _untimed(False, "incorrect", "M=4,N=256 bfloat16: 12 of 1024 elements outside atol=1e-07"),
        ),
        (Node(3, (), "# k3", note="two-pass softmax", **cost), _untimed()),
    ]
    for node, ev in nodes:
        call = repo.record_llm_call(run_id, None, LLMCallRecord("openai", "local-coder", "p", "r", 1000, 500, 0.0125))
        repo.add_node(
            run_id,
            node,
            rng_state={"version": 3, "internal": [0] * 625, "gauss": None},
            elapsed_s=1.0,
            llm_call_ids=[call],
        )
        repo.record_evaluation(run_id, node.id, ev, policy_state={}, rng_state=None, elapsed_s=2.0)
    repo.update_run(run_id, status="finished", termination_reason="nodes")
    return url, run_id


def _env():
    env = {k: v for k, v in os.environ.items() if k != "KERNELEVOLVE_DB"}
    env["COLUMNS"] = "80"
    return env


def _views(folder: Path) -> dict:
    """`show`, `show --node 1` and `runs` of the _db run, in one start of the CLI (each its own output)."""
    url, run_id = _db(folder)
    commands = {
        "show": ["show", run_id, "--db", url],
        "show --node": ["show", run_id, "--db", url, "--node", "1"],
        "runs": ["runs", "--db", url],
    }
    answers = kernelevolve_many(list(commands.values()), folder, _env())
    return {"run_id": run_id, **{name: [p.returncode, p.stdout, p.stderr] for name, p in zip(commands, answers)}}


@pytest.fixture
def views(tmp_path_factory, worker_id):
    """(run id, name -> its command's CompletedProcess), made once this session: the three tests read it."""
    answers = made_once(tmp_path_factory, worker_id, "views", _views)
    return answers["run_id"], lambda name: subprocess.CompletedProcess(name, *answers[name])


def test_show_prints_notes_and_failure_lines_at_80_columns(views):
    """Was: notes were just draft/optimise/debug, failed nodes showed no message, and `show`
    printed `True`/`-` where `eval` printed `yes`/`—`."""
    run_id, answer = views
    proc = answer("show")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert lines[0].startswith(f"run {run_id}: softmax, greedy on interpret, openai:local-coder")
    assert "#0 draft: correct (untimed) | one program per row with an online max" in out
    assert "#1 draft: failed (no_code): operator error: openai:local-coder: gave up" in out
    assert "#2 improve: failed (incorrect): M=4,N=256 bfloat16: 12 of 1024" in out
    assert "#3 draft: correct (untimed) | two-pass softmax" in out
    assert "True" not in out and "False" not in out and "speedup" not in out and "latency" not in out
    assert any(line.split()[:2] == ["M=4,N=256", "bfloat16"] and "correct" in line for line in lines)


def test_show_node_without_source_says_why(views):
    proc = views[1]("show --node")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "node 1 has no source" in proc.stderr and "Connection refused" in proc.stderr


def test_runs_shows_model_best_and_cost_at_80_columns(views):
    """Was: `runs` showed neither the model nor the best result nor the cost."""
    run_id, answer = views
    proc = answer("runs")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), proc.stdout
    row = next(line for line in lines if line.startswith(run_id))
    assert "openai:local-coder" in row + proc.stdout and "#0 correct (untimed)" in proc.stdout
    assert "$0.04" in proc.stdout and "2/4/4" in proc.stdout and "finished (nodes)" in proc.stdout


def test_printed_commands_stay_whole_on_their_own_line(tmp_path):
    """Was: `resume with `kernelevolve resume ... --db ...`` broken across lines at 80 columns."""
    folder = tmp_path / ("a-rather-long-directory-name-" * 2)
    folder.mkdir()
    db = f"sqlite:///{folder / 'runs.db'}"
    run = ["run", str(SOFTMAX), "--device", "interpret", "--budget", "1", "--drafts", "1", "--db", db, "--no-preflight"]
    proc, summary = kernelevolve_many([run, [*run, "--json"]], tmp_path, _env())  # one start, one fork server
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    run_id = lines[0].split()[1]
    assert f"  kernelevolve resume {run_id} --db {db}" in lines
    assert f"  kernelevolve show {run_id} --node 0 --db {db}" in lines
    node = json.loads(summary.stdout)["nodes"][0]
    assert node["note"] and "message" in node  # --json carries each node's note and failure message
    # Commands, and the one-line-per-node progress log written to files and pipes, are never wrapped.
    assert all(len(line) <= 80 for line in lines if not line.startswith(("  kernelevolve ", "node "))), proc.stdout


def test_kb_search_and_insights_read_at_80_columns(tmp_path):
    """Was: tables folding cells a few letters per line ('dimensio / n', 'cross_e / ntropy')."""
    from kernelevolve.knowledge import KnowledgeBase

    url, run_id = _db(tmp_path)
    repo = Repository(url)
    long = "Power-of-two aranges fixed the compile error; keep BLOCK_N a power of two and split rows longer than 65536"
    repo.add_insight(run_id, 0, "softmax", "h200", long)
    proc, insights = kernelevolve_many(  # both in one start of the CLI
        [["kb", "search", "online softmax long rows", "--hardware", "h200"], ["insights", "--db", url]],
        tmp_path,
        _env(),
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), proc.stdout
    title = KnowledgeBase.load().get("kernels/softmax").title
    assert " ".join(title.split()) in " ".join(proc.stdout.split())  # whole words, in order
    assert any(line.startswith("1. kernels/") for line in lines)

    assert all(len(line) <= 80 for line in insights.stdout.splitlines()), insights.stdout
    assert long in " ".join(insights.stdout.split()) and f"run {run_id} node 0" in insights.stdout


def test_a_timed_eval_reads_at_80_columns_and_wide():
    """Timed results have eight columns: at 80 columns they become entries, not squeezed cells."""
    from rich.console import Console

    import importlib

    app_module = importlib.import_module("kernelevolve.cli.app")
    eval_cmd = importlib.import_module("kernelevolve.cli.eval_cmd")

    shapes = [
        ShapeResult(
            "M=32768,N=4096 bfloat16",
            {},
            "bfloat16",
            True,
            max_abs_err=3.4e-3,
            max_rel_err=3.8e-3,
            latency_ms=0.4123,
            baseline_ms=0.5234,
            baseline_cached=True,
            gbps=2600.0,
        )
    ]
    result = EvalResult(correct=True, timed=True, device="cuda", shapes=shapes, marks={"suspicious": "above peak"})
    for width in (80, 160):
        console = Console(width=width, record=True, file=open(os.devnull, "w"))
        saved = app_module.console, eval_cmd.console
        app_module.console = eval_cmd.console = console
        try:
            eval_cmd.print_result(result, "softmax", "softmax.py")
        finally:
            app_module.console, eval_cmd.console = saved
        text = console.export_text()
        assert all(len(line) <= width for line in text.splitlines()), text
        assert "…" not in text and "1.27x" in text and "(cached)" in text and "0.5234" in text
        assert "fitness 1.269x (geometric-mean speedup over 1 shape)" in text
        assert "suspicious: above peak; held for review" in text
