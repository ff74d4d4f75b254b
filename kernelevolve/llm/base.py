"""What every model provider shares: one call in, one reply out, retried when the service
says "later" (429 rate limit, 529 overloaded, other 5xx, dropped connections).

A provider subclass implements `_send(prompt, system)`, doing exactly one HTTP request with the
SDK's own retries switched off, so every attempt is counted here and its back-off honours the
server's retry-after header.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from kernelevolve.llm.pricing import cost_usd


class LLMError(RuntimeError):
    """A call that did not give a reply. `permanent` errors (bad key, unknown model, bad request)
    will not go away by asking again; the others ran out of retries."""

    def __init__(self, message: str, *, permanent: bool = False, status: int | None = None):
        super().__init__(message)
        self.permanent = permanent
        self.status = status


class RetryableError(Exception):
    """One attempt failed in a way worth retrying; `retry_after` is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


@dataclass
class LLMReply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False
    retries: list[str] = field(default_factory=list)  # why each earlier attempt was retried


RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}


def parse_retry_after(headers) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds; HTTP dates are ignored)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


class Provider:
    """Base class: subclasses set `name` and implement `_send`."""

    name = "provider"

    def __init__(self, model: str, *, temperature: float | None = None, max_tokens: int = 8192,
                 timeout_s: float = 600.0, max_retries: int = 6, backoff_s: float = 2.0, max_backoff_s: float = 120.0,
                 system: str | None = None):
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.system = system
        self._sleep = time.sleep
        self._jitter = random.Random(0)  # back-off jitter only; never the run's rng

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"

    def _send(self, prompt: str, system: str | None, max_tokens: int) -> LLMReply:
        raise NotImplementedError

    def complete(self, prompt: str, system: str | None = None, max_tokens: int | None = None) -> LLMReply:
        """One reply, retried with exponential back-off; LLMError when none came."""
        system = system if system is not None else self.system
        max_tokens = max_tokens or self.max_tokens
        retries: list[str] = []
        start = time.monotonic()
        for attempt in range(self.max_retries + 1):
            try:
                reply = self._send(prompt, system, max_tokens)
            except RetryableError as e:
                retries.append(str(e))
                if attempt == self.max_retries:
                    raise LLMError(f"{self.label}: gave up after {attempt + 1} attempts: {e}", status=e.status) from None
                delay = e.retry_after if e.retry_after is not None else self.backoff_s * 2**attempt * (0.5 + self._jitter.random())
                self._sleep(min(delay, self.max_backoff_s))
                continue
            reply.latency_s = time.monotonic() - start
            reply.attempts = attempt + 1
            reply.retries = retries
            if not reply.cost_usd:
                reply.cost_usd = self.cost(reply.input_tokens, reply.output_tokens)
            return reply
        raise AssertionError("unreachable")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return cost_usd(self.model, input_tokens, output_tokens)


def classify_status(label: str, status: int, message: str, headers) -> Exception:
    """An HTTP error status as RetryableError (try again) or a permanent LLMError."""
    if status in RETRY_STATUSES or status >= 500:
        return RetryableError(f"HTTP {status}: {message}", parse_retry_after(headers), status)
    hint = {401: " (check the API key)", 403: " (key lacks access)", 404: " (unknown model or wrong base URL)"}.get(status, "")
    return LLMError(f"{label}: HTTP {status}{hint}: {message}", permanent=True, status=status)
