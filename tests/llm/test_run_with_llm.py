"""Whole `kernelevolve run` searches under the Triton interpreter, with the Anthropic and OpenAI
providers talking through their real SDKs to a scripted local server, and with no key at all (the
offline operator). The command runs in process (CliRunner): a new interpreter's imports would be most
of a test's time, and the runs of one test process share the evaluator's fork server (candidates
and judges are still sandboxed processes)."""

import json
import threading

import pytest

from kernelevolve.llm.base import CHECK_PROMPT
from kernelevolve.memory import Repository
from kernelevolve.operators.tunables import read_declared, rewrite_config
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from tests.cli.console import kernelevolve_in_process
from tests.llm.fake_llm_server import FakeLLMServer

FIXED = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()
BROKEN = FIXED.replace("tl.arange(0, BLOCK_N)", "tl.arange(0, BLOCK_N + 1)")  # Triton refuses non-power-of-2 ranges
assert BROKEN != FIXED, (
    "knowledge_base/kernels/softmax.py no longer has tl.arange(0, BLOCK_N): pick another way to break it"
)
INSIGHT = "Power-of-two aranges fixed the compile error; keep BLOCK_N a power of two."
LLM_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KERNELEVOLVE_MODEL",
    "KERNELEVOLVE_PRICE",
    "KERNELEVOLVE_DB",
)


class Script:
    """Plays the model: the first draft request is rate-limited, the first draft reply has no
    code, the second draft does not compile, debug replies fix it, optimise replies move a knob."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rate_limited = False
        self.drafts = 0
        self.optimised = 0

    def __call__(self, api, prompt, body):
        with self.lock:
            if prompt == CHECK_PROMPT:  # `run` checks the model with one cheap request first
                return 200, "OK", {}
            if prompt.startswith("You keep the notes"):
                return 200, INSIGHT, {}
            if prompt.startswith("# Task: write"):
                if not self.rate_limited:
                    self.rate_limited = True
                    return 429, "Number of requests has exceeded your rate limit", {"retry-after": "0"}
                self.drafts += 1
                if self.drafts == 1:
                    return 200, "I would use an online softmax with one pass per row. Shall I write it?", {}
                return 200, f"Change: one tile per row\n\n```python\n{BROKEN}```\n", {}
            if prompt.startswith("# Task: fix"):
                return 200, f"Change: power-of-two aranges\n\n```python\n{FIXED}```\n", {}
            if prompt.startswith("# Task: make"):
                self.optimised += 1
                faster = rewrite_config(FIXED, {"tile_elems": [2048, 8192, 16384][self.optimised % 3]})
                return 200, f"Change: another tile size\n\n```python\n{faster}```\n", {}
            return 400, f"unexpected prompt: {prompt[:80]}", {}


def _kernelevolve(args, env, cwd, monkeypatch):
    """`kernelevolve ARGS` in process, with `env` set and cwd in `cwd`: (returncode, stdout, stderr)."""
    return kernelevolve_in_process(args, monkeypatch, env, cwd)


def _clean_env(tmp_path, monkeypatch):
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    return {"KERNELEVOLVE_CACHE_DIR": str(tmp_path / "cache")}  # a fresh reply cache


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_llm_search_debugs_failures_and_records_tokens(tmp_path, provider, monkeypatch):
    script = Script()
    with FakeLLMServer(script) as server:
        env = _clean_env(tmp_path, monkeypatch)
        if provider == "anthropic":
            env.update(ANTHROPIC_API_KEY="dummy-key", ANTHROPIC_BASE_URL=server.url)
            model, price = "anthropic:claude-opus-4-5", (5.0, 25.0)
        else:
            env.update(OPENAI_API_KEY="dummy-key", OPENAI_BASE_URL=server.url + "/v1", KERNELEVOLVE_PRICE="1.5,6")
            model, price = "openai:local-coder", (1.5, 6.0)
        db = f"sqlite:///{tmp_path / 'runs.db'}"
        proc = _kernelevolve(
            [
                "run",
                str(REPO_ROOT / "specs" / "softmax.yaml"),
                "--model",
                model,
                "--device",
                "interpret",
                "--budget",
                "5",
                "--drafts",
                "2",
                "--workers",
                "1",
                "--seed",
                "3",
                "--db",
                db,
                "--json",
                "--temperature",
                "0.3",
                "--max-tokens",
                "4000",
            ],
            env,
            tmp_path,
            monkeypatch,
        )
        received = list(server.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {r.api for r in received} == {provider}
    proposals = [r for r in received if r.prompt.startswith("# Task:")]
    assert proposals and all(
        r.body["temperature"] == 0.3 and r.body.get("max_tokens", r.body.get("max_completion_tokens")) == 4000
        for r in proposals
    )  # the command line's settings reach the API
    run_id = json.loads(proc.stdout)["id"]

    drafts = [r for r in received if r.prompt.startswith("# Task: write")]
    debugs = [r.prompt for r in received if r.prompt.startswith("# Task: fix")]
    optimises = [r.prompt for r in received if r.prompt.startswith("# Task: make")]
    assert len(drafts) == 3 and drafts[0].prompt == drafts[1].prompt  # the rate-limited request was retried as is
    # A debug prompt carries the failing parent's error: class, message, and its source.
    compile_debug = [p for p in debugs if "failure class: compile" in p]
    assert compile_debug and "arange's range must be a power of 2" in compile_debug[0]
    assert "tl.arange(0, BLOCK_N + 1)" in compile_debug[0]
    assert all("Output contract" in p and "ModelNew(" in p for p in debugs + optimises)
    # An optimise prompt carries the parent's evaluation (per-shape timings on a GPU; the
    # interpreter measures none, and the prompt says so rather than inventing numbers).
    assert optimises and "correct at all 2 shapes (device interpret: not timed)" in optimises[0]

    repo = Repository(db)
    graph = repo.load_graph(run_id)
    failures = [graph[i].failure for i in sorted(n.id for n in graph.nodes())]
    assert failures[:2] == ["no_code", "compile"] and None in failures[2:]
    assert "no class ModelNew" in graph[0].evaluation.message
    calls = [c for c in repo.llm_calls(run_id) if c.error is None]
    node_calls = [c for c in calls if c.node_id is not None]
    assert len(node_calls) == len(graph) and all(c.input_tokens == 1000 and c.output_tokens == 500 for c in calls)
    expected_cost = (1000 * price[0] + 500 * price[1]) / 1e6
    assert all(c.cost_usd == pytest.approx(expected_cost) for c in calls)
    assert repo.totals(run_id) == (1500 * len(graph), pytest.approx(expected_cost * len(graph)))
    insights = repo.insights(family="softmax", hardware="h200")
    assert insights and all(INSIGHT in i.text for i in insights)


def test_offline_search_with_no_key_runs_end_to_end(tmp_path, monkeypatch):
    env = _clean_env(tmp_path, monkeypatch)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = _kernelevolve(
        [
            "run",
            str(REPO_ROOT / "specs" / "softmax.yaml"),
            "--device",
            "interpret",
            "--budget",
            "3",
            "--drafts",
            "1",
            "--seed",
            "5",
            "--db",
            db,
            "--json",
        ],
        env,
        tmp_path,
        monkeypatch,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = json.loads(proc.stdout)["id"]
    repo = Repository(db)
    nodes = sorted(repo.load_graph(run_id).nodes(), key=lambda n: n.id)
    assert len(nodes) == 3 and all(n.correct for n in nodes)
    assert nodes[0].source == FIXED  # the knowledge base's reference kernel, as written
    configs = [read_declared(n.source).config for n in nodes]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == 3  # each improve moved the tunables

    def without_config(source):
        first, _, last, _ = read_declared(source).span
        lines = source.splitlines()
        return lines[: first - 1] + lines[last:]

    assert all(without_config(n.source) == without_config(FIXED) for n in nodes)  # only CONFIG differs
    assert repo.llm_calls(run_id) == [] and repo.totals(run_id) == (0, 0.0)
