"""The LLM operator end to end at the operator level: prompts, reply cache, records, no_code,
the file provider and rule-based insights."""

import random
import threading
import time

import pytest

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.llm.base import LLMError
from kernelevolve.llm.cache import ReplyCache
from kernelevolve.llm.file_provider import FileProvider
from kernelevolve.llm.providers import OpenAIProvider
from kernelevolve.operators import OperatorError, resolve_operator
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.operators.insights import rule_insight
from kernelevolve.operators.llm_operator import LLMOperator
from kernelevolve.paths import SPECS
from kernelevolve.spec import load_spec
from tests.llm.fake_llm_server import FakeLLMServer

KERNEL = "```python\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n```"


@pytest.fixture
def spec():
    return load_spec(SPECS / "rmsnorm.yaml")


def _ctx(spec, calls):
    return OperatorContext(spec=spec, run_id="r-t", device="cuda", rng=random.Random(0), record_llm_call=calls.append)


def _openai(monkeypatch, server):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    return OpenAIProvider("local-coder", backoff_s=0.0, price=(2, 8))  # the run's price (saved with it)


def test_reply_cache_replays_without_paying_and_counts_samples(monkeypatch, tmp_path, spec):
    replies = iter([f"Change: version {i}\n{KERNEL.replace('pass', f'x = {i}')}" for i in range(10)])
    with FakeLLMServer(lambda api, prompt, body: (200, next(replies), {})) as server:
        provider = _openai(monkeypatch, server)
        calls = []
        op = LLMOperator(provider, cache=ReplyCache(tmp_path), llm_insights=False)
        first, second = op.draft(spec, _ctx(spec, calls)), op.draft(spec, _ctx(spec, calls))
        assert len(server.requests) == 2 and first.source != second.source  # same prompt, two samples
        assert (
            first.note == "version 0"
            and first.tokens == 1500
            and first.cost_usd == pytest.approx((1000 * 2 + 500 * 8) / 1e6)
        )
        # A "resumed" process: a fresh operator on the same cache pays for nothing.
        again = LLMOperator(provider, cache=ReplyCache(tmp_path), llm_insights=False)
        replay = [again.draft(spec, _ctx(spec, calls)) for _ in range(2)]
        assert len(server.requests) == 2
        assert [p.source for p in replay] == [first.source, second.source]
        assert replay[0].tokens == 0 and replay[0].cost_usd == 0.0
    assert [c.cached for c in calls] == [False, False, True, True]
    assert calls[0].input_tokens == 1000 and calls[0].prompt.startswith("# Task: write a fast Triton kernel")


def test_reply_without_model_new_is_a_no_code_proposal(monkeypatch, tmp_path, spec):
    with FakeLLMServer(lambda api, prompt, body: (200, "Sorry, here is an idea but no code.", {})) as server:
        op = LLMOperator(_openai(monkeypatch, server), cache=ReplyCache(tmp_path))
        p = op.draft(spec, _ctx(spec, []))
    assert p.source is None and p.failure == "no_code" and "no class ModelNew" in p.message and p.tokens == 1500


def test_exhausted_retries_raise_operator_error_and_are_recorded(monkeypatch, tmp_path, spec):
    with FakeLLMServer(lambda api, prompt, body: (500, "internal", {"retry-after": "0"})) as server:
        provider = _openai(monkeypatch, server)
        provider.max_retries = 1
        calls = []
        with pytest.raises(OperatorError, match="gave up after 2 attempts"):
            LLMOperator(provider, cache=ReplyCache(tmp_path)).draft(spec, _ctx(spec, calls))
    assert calls and calls[0].error and calls[0].reply == ""


def test_file_provider_writes_the_prompt_and_waits_for_the_reply(tmp_path, spec):
    folder = tmp_path / "exchange"
    op = resolve_operator(f"file:{folder}")
    provider = op.provider
    # The provider waits up to an hour by default: if the answer never comes, fail in seconds instead.
    provider.wait_s, provider.poll_s = 10.0, 0.05
    answered = threading.Event()

    def answer():  # a person answering in another window
        deadline = time.monotonic() + provider.wait_s
        while time.monotonic() < deadline:
            prompts = list(folder.glob("*.prompt.md"))
            if prompts:
                prompts[0].with_name(prompts[0].name.replace(".prompt.md", ".reply.md")).write_text(KERNEL)
                answered.set()
                return
            time.sleep(0.02)

    helper = threading.Thread(target=answer, daemon=True)
    helper.start()
    p = op.draft(spec, _ctx(spec, []))
    helper.join()
    assert answered.is_set() and "class ModelNew" in p.source
    (prompt_file,) = folder.glob("*.prompt.md")
    assert "Output contract" in prompt_file.read_text()


def test_file_provider_times_out_with_a_clear_message(tmp_path):
    provider = FileProvider(tmp_path, wait_s=0.2, poll_s=0.05)
    with pytest.raises(LLMError) as e:
        provider.complete("a prompt nobody answers")
    message = str(e.value)
    assert e.value.permanent  # not retried: the run stops and tells the person what to write where
    assert "no reply after 0 s" in message and ".reply.md" in message and "resume the run" in message


def test_rule_insight_names_regressed_shapes_and_the_gain_elsewhere(spec):
    def ev(latencies):
        shapes = [
            ShapeResult(label=label, params={}, dtype="bfloat16", correct=True, latency_ms=ms, baseline_ms=1.0)
            for label, ms in latencies.items()
        ]
        return EvalResult(correct=True, shapes=shapes, device="cuda", timed=True)

    parent = ParentView(3, "src", "draft", ev({"M=1,N=2 bf16": 1.0, "M=3,N=4 bf16": 1.0, "M=5,N=6 bf16": 1.0}))
    child = ParentView(
        7,
        "src",
        "improve",
        ev({"M=1,N=2 bf16": 1.1, "M=3,N=4 bf16": 0.9, "M=5,N=6 bf16": 0.88}),
        note="BLOCK_N 1024->2048",
    )
    text = rule_insight(spec, child, [parent])
    assert text == (
        "improve of #3 -> #7 (BLOCK_N 1024->2048): M=1,N=2 bf16 regressed 0.91x; others +12% (fitness 1.00x -> 1.05x)"
    )
    failed = ParentView(
        8, "src", "improve", EvalResult.failed("compile", "out of resource: shared memory"), note="stages 2->4"
    )
    assert (
        rule_insight(spec, failed, [child])
        == "improve of #7 -> #8 (stages 2->4): FAILED compile: out of resource: shared memory"
    )
