"""Providers through the real anthropic and openai SDKs against a local fake API server."""

import pytest

from kernelevolve.llm.base import LLMError
from kernelevolve.llm.providers import AnthropicProvider, OpenAIProvider
from tests.llm.fake_llm_server import FakeLLMServer


def _script(*steps):
    """A responder that plays `steps` in order (the last one repeats)."""
    steps = list(steps)

    def respond(api, prompt, body):
        return steps.pop(0) if len(steps) > 1 else steps[0]

    return respond


@pytest.fixture
def anthropic_env(monkeypatch):
    def make(server, **kw):
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        return AnthropicProvider("claude-opus-4-5", backoff_s=0.01, **kw)

    return make


@pytest.fixture
def openai_env(monkeypatch):
    def make(server, official=False, **kw):
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        return OpenAIProvider("gpt-5", backoff_s=0.01, **kw)

    return make


def test_anthropic_retries_a_rate_limit_honouring_retry_after(anthropic_env):
    with FakeLLMServer(
        _script((429, "slow down", {"retry-after": "0.2"}), (529, "overloaded", {}), (200, "hello", {}))
    ) as server:
        provider = anthropic_env(server, temperature=0.3, max_tokens=123)
        slept = []
        provider._sleep = lambda s: slept.append(s)
        reply = provider.complete("the prompt", "the system")
    assert reply.text == "hello" and reply.attempts == 3
    assert slept[0] == 0.2  # the server's hint, not the exponential guess
    assert (reply.input_tokens, reply.output_tokens) == (1000, 500)
    assert reply.cost_usd == pytest.approx((1000 * 5 + 500 * 25) / 1e6)  # claude-opus-4-5 list price
    body = server.requests[-1].body
    assert body["system"] == "the system" and body["max_tokens"] == 123 and body["temperature"] == 0.3
    headers = server.requests[-1].headers
    assert "test-key" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    assert len(server.requests) == 3  # the SDK's own retries are off: every attempt is ours


def test_anthropic_gives_up_after_max_retries_and_fails_fast_on_a_bad_key(anthropic_env):
    with FakeLLMServer(_script((503, "down", {}))) as server:
        provider = anthropic_env(server, max_retries=2)
        provider._sleep = lambda s: None
        with pytest.raises(LLMError, match="gave up after 3 attempts") as e:
            provider.complete("p")
        assert not e.value.permanent and len(server.requests) == 3
    with FakeLLMServer(_script((401, "invalid x-api-key", {}))) as server:
        provider = anthropic_env(server)
        with pytest.raises(LLMError, match="HTTP 401 \\(check the API key\\): invalid x-api-key") as e:
            provider.complete("p")
        assert e.value.permanent and len(server.requests) == 1


def test_openai_compatible_server_gets_max_tokens_and_costs_nothing(openai_env):
    with FakeLLMServer(_script((429, "rate", {"retry-after-ms": "10"}), (200, "world", {}))) as server:
        provider = openai_env(server, max_tokens=77)
        provider._sleep = lambda s: None
        reply = provider.complete("user prompt", "sys prompt")
    body = server.requests[-1].body
    assert reply.text == "world" and reply.attempts == 2
    assert body["messages"] == [{"role": "system", "content": "sys prompt"}, {"role": "user", "content": "user prompt"}]
    assert body["max_tokens"] == 77 and "temperature" not in body
    assert reply.cost_usd == 0.0  # a self-hosted server is free unless KERNELEVOLVE_PRICE says otherwise


def test_missing_keys_are_clear_errors(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicProvider("claude-opus-4-5")
    with pytest.raises(LLMError, match="OPENAI_API_KEY is not set"):
        OpenAIProvider("gpt-5")
