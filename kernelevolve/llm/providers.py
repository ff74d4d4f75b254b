"""Anthropic and OpenAI(-compatible) providers through their official SDKs.

Keys come from ANTHROPIC_API_KEY / OPENAI_API_KEY; base URLs from ANTHROPIC_BASE_URL /
OPENAI_BASE_URL (read by the SDKs themselves), so a vLLM, Ollama or llama.cpp server is
`--model openai:NAME` with OPENAI_BASE_URL=http://host:port/v1 (no key needed there).
The SDKs' own retries are off: Provider.complete retries, counts and backs off.
"""

from __future__ import annotations

import os

from kernelevolve.llm.base import LLMError, LLMReply, Provider, RetryableError, classify_status
from kernelevolve.llm.pricing import cost_usd

OPENAI_DEFAULT_HOST = "api.openai.com"


class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(self, model: str, **options):
        super().__init__(model, **options)
        import anthropic

        key = os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise LLMError("anthropic: ANTHROPIC_API_KEY is not set", permanent=True)
        self._sdk = anthropic
        self._client = anthropic.Anthropic(api_key=key, max_retries=0, timeout=self.timeout_s)

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url)

    def _send(self, prompt: str, system: str | None, max_tokens: int) -> LLMReply:
        kwargs = {"model": self.model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}
        if system:
            kwargs["system"] = system
        if self.temperature is not None:
            # This SDK release types no `temperature` argument; the API still takes the field.
            kwargs["extra_body"] = {"temperature": self.temperature}
        response = _request(self, self._client.messages.create, kwargs)
        text = "".join(getattr(block, "text", "") for block in response.content if getattr(block, "type", "") == "text")
        usage = response.usage
        return LLMReply(
            text=text, input_tokens=int(usage.input_tokens or 0), output_tokens=int(usage.output_tokens or 0)
        )


class OpenAIProvider(Provider):
    name = "openai"

    def __init__(self, model: str, **options):
        super().__init__(model, **options)
        import openai

        base_url = os.environ.get("OPENAI_BASE_URL")
        key = os.environ.get("OPENAI_API_KEY")
        if not key and not base_url:
            raise LLMError(
                "openai: OPENAI_API_KEY is not set (or set OPENAI_BASE_URL for a compatible server)", permanent=True
            )
        self._sdk = openai
        # Compatible servers usually need no key, but the SDK insists on one.
        self._client = openai.OpenAI(api_key=key or "unused", max_retries=0, timeout=self.timeout_s)
        self.official = OPENAI_DEFAULT_HOST in str(self._client.base_url)

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url)

    def _send(self, prompt: str, system: str | None, max_tokens: int) -> LLMReply:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        kwargs = {"model": self.model, "messages": messages}
        # OpenAI's reasoning models take only max_completion_tokens; many compatible servers only max_tokens.
        kwargs["max_completion_tokens" if self.official else "max_tokens"] = max_tokens
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        response = _request(self, self._client.chat.completions.create, kwargs)
        if not response.choices:
            raise RetryableError("reply had no choices")
        text = response.choices[0].message.content or ""
        usage = response.usage
        inp = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        out = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        return LLMReply(text=text, input_tokens=inp, output_tokens=out)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        if not self.official and self.price is None:
            return 0.0  # a self-hosted server
        return cost_usd(self.model, input_tokens, output_tokens, self.price)


def _request(provider: AnthropicProvider | OpenAIProvider, create, kwargs: dict):
    """create(**kwargs) with the SDK's errors turned into ours (both SDKs name their error classes alike):
    an HTTP status classified, a timeout or a refused connection retryable, anything else final."""
    sdk = provider._sdk
    try:
        return create(**kwargs)
    except sdk.APIStatusError as e:
        raise classify_status(provider.label, e.status_code, _message(e), e.response.headers) from None
    except sdk.APITimeoutError as e:
        raise RetryableError(f"{type(e).__name__}: {e} (no reply within {provider.timeout_s:g}s)") from None
    except sdk.APIConnectionError as e:
        raise RetryableError(_connection_message(e, provider.endpoint), connect=True) from None
    except sdk.APIError as e:  # malformed response and the like
        raise LLMError(f"{provider.label}: {type(e).__name__}: {e}") from None


def _connection_message(error, endpoint: str) -> str:
    """`APIConnectionError: cannot reach http://host:port/v1/: [Errno 111] Connection refused`."""
    cause = error.__cause__ or error.__context__
    detail = f"{cause}".strip().splitlines()[0][:200] if cause is not None and str(cause).strip() else str(error)
    return f"{type(error).__name__}: cannot reach {endpoint}: {detail}"


def _message(error) -> str:
    """The API's own error message when the body carries one, else the SDK's text; one line."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"]).splitlines()[0][:300]
    return str(error).splitlines()[0][:300] if str(error) else type(error).__name__
