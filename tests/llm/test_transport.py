"""Transport failures through the real anthropic and openai SDKs: a refused connection, a request
that times out, a reply without choices, and the back-off between attempts."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from kernelevolve.llm.base import LLMError
from kernelevolve.llm.providers import AnthropicProvider, OpenAIProvider
from tests.llm.fake_llm_server import FakeLLMServer

PROVIDERS = ["anthropic", "openai"]


def _provider(monkeypatch, api: str, url: str, **options):
    if api == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        return AnthropicProvider("claude-opus-4-5", **options)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    return OpenAIProvider("local-coder", **options)


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more: connections are refused


@pytest.mark.parametrize("api", PROVIDERS)
def test_a_refused_connection_is_retried_then_given_up(monkeypatch, api):
    provider = _provider(monkeypatch, api, _closed_port_url(), max_retries=2, timeout_s=5)
    slept = []
    provider._sleep = slept.append
    with pytest.raises(LLMError) as e:
        provider.complete("p")
    assert not e.value.permanent and e.value.status is None
    assert f"{api}:" in str(e.value) and "gave up after 3 attempts: APIConnectionError" in str(e.value)
    assert len(slept) == 2  # a back-off between attempts, none after the last


@pytest.mark.parametrize("api", PROVIDERS)
def test_a_request_that_times_out_is_retried(monkeypatch, api):
    first = threading.Event()

    def respond(api_, prompt, body):
        if not first.is_set():
            first.set()
            time.sleep(2.0)  # the client gives up after 0.3 s
        return 200, "on time", {}

    with FakeLLMServer(respond) as server:
        provider = _provider(monkeypatch, api, server.url, timeout_s=0.3, max_retries=2)
        provider._sleep = lambda s: None
        started = time.monotonic()
        reply = provider.complete("p")
    assert reply.text == "on time" and reply.attempts == 2 and len(server.requests) == 2
    assert len(reply.retries) == 1 and reply.retries[0].startswith("APITimeoutError")
    assert time.monotonic() - started < 2.0  # it did not wait for the slow answer


def test_a_reply_without_choices_is_retried_then_given_up(monkeypatch):
    empty = {
        "id": "chatcmpl-0",
        "object": "chat.completion",
        "created": 0,
        "model": "local-coder",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5},
    }
    replies = [(200, empty, {}), (200, "second time lucky", {})]
    with FakeLLMServer(lambda api, prompt, body: replies.pop(0)) as server:
        provider = _provider(monkeypatch, "openai", server.url, max_retries=3)
        provider._sleep = lambda s: None
        reply = provider.complete("p")
    assert reply.text == "second time lucky" and reply.attempts == 2 and reply.retries == ["reply had no choices"]
    with FakeLLMServer(lambda api, prompt, body: (200, empty, {})) as server:
        provider = _provider(monkeypatch, "openai", server.url, max_retries=1)
        provider._sleep = lambda s: None
        with pytest.raises(LLMError, match="openai:local-coder: gave up after 2 attempts: reply had no choices"):
            provider.complete("p")
        assert len(server.requests) == 2


@pytest.mark.parametrize("api", PROVIDERS)
def test_back_off_doubles_with_jitter_and_is_capped(monkeypatch, api):
    """Attempt k (from 0) waits backoff_s * 2**k * U(0.5, 1.5), at most max_backoff_s; a server's
    retry-after is taken as is, up to the same cap."""
    with FakeLLMServer(lambda api_, prompt, body: (503, "busy", {})) as server:
        provider = _provider(monkeypatch, api, server.url, backoff_s=1.0, max_backoff_s=10.0, max_retries=6)
        slept = []
        provider._sleep = slept.append
        with pytest.raises(LLMError, match="gave up after 7 attempts: HTTP 503: busy"):
            provider.complete("p")
    jitter = random.Random(0)  # the provider's own jitter stream, never the run's
    expected = [min(1.0 * 2**k * (0.5 + jitter.random()), 10.0) for k in range(6)]
    assert slept == pytest.approx(expected)
    for k in range(3):  # 2**k * [0.5, 1.5) stays under the cap up to k = 2
        assert 0.5 * 2**k <= slept[k] < 1.5 * 2**k
    assert slept[-1] == 10.0  # 32 * U(0.5, 1.5) >= 16: capped

    hints = [
        (429, "slow down", {"retry-after": "3"}),
        (429, "slow down", {"retry-after-ms": "250"}),
        (429, "slow down", {"retry-after": "600"}),
        (200, "ok", {}),
    ]
    with FakeLLMServer(lambda api_, prompt, body: hints.pop(0)) as server:
        provider = _provider(monkeypatch, api, server.url, backoff_s=1.0, max_backoff_s=10.0)
        slept = []
        provider._sleep = slept.append
        assert provider.complete("p").attempts == 4
    assert slept == [3.0, 0.25, 10.0]
