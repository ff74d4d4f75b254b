"""What every model provider shares: one call in, one reply out, retried when the service
says "later" (429 rate limit, 529 overloaded, other 5xx, dropped connections).

A provider subclass implements `_send(prompt, system)`, doing exactly one HTTP request with the
SDK's own retries switched off; tenacity retries it here, so every attempt is counted (the
count is stored with the call, llm_calls.attempts) and the back-off honours the server's
retry-after header, which the SDKs' own retry would hide.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field

from tenacity import RetryCallState, Retrying, retry_if_exception_type

from kernelevolve.llm.pricing import cost_usd

log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """A call that did not give a reply. `permanent` errors (bad key, unknown model, bad request)
    will not go away by asking again; the others ran out of retries."""

    def __init__(self, message: str, *, permanent: bool = False, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.permanent = permanent
        self.status = status
        self.attempts = attempts  # requests made before giving up


class RetryableError(Exception):
    """One attempt failed in a way worth retrying; `retry_after` is the server's hint in seconds."""

    def __init__(
        self, message: str, retry_after: float | None = None, status: int | None = None, connect: bool = False
    ):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        # No connection at all (refused, DNS, TLS): a dead or mistyped endpoint, not a busy one.
        # Retried only CONNECT_RETRIES times with short waits, so a run fails in seconds, not minutes.
        self.connect = connect


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
CONNECT_RETRIES = 2  # attempts after the first when nothing answers at all
CONNECT_BACKOFF_S = 1.0
CHECK_PROMPT = "Reply with the single word OK."


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

    def __init__(
        self,
        model: str,
        *,
        temperature: float | None = None,
        max_tokens: int = 8192,
        timeout_s: float = 600.0,
        max_retries: int = 6,
        backoff_s: float = 2.0,
        max_backoff_s: float = 120.0,
        system: str | None = None,
        price: tuple[float, float] | None = None,
    ):
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.system = system
        self.price = None if price is None else (float(price[0]), float(price[1]))  # USD per million in, out
        self._sleep = time.sleep
        self._jitter = random.Random(0)  # back-off jitter only; never the run's rng

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"

    @property
    def endpoint(self) -> str:
        """Where requests go (the base URL); part of the reply-cache key."""
        return ""

    def settings(self) -> dict:
        """Everything besides the prompt that changes a reply (for the reply-cache key)."""
        return {
            "provider": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def check(self) -> None:
        """One cheap request (a few tokens) to see that the endpoint, key and model work;
        LLMError with the provider's message when they do not. Connection errors are not retried."""
        saved = self.max_retries
        self.max_retries = min(saved, 1)
        try:
            self.complete(CHECK_PROMPT, system="", max_tokens=16, connect_retries=0)
        finally:
            self.max_retries = saved

    def _send(self, prompt: str, system: str | None, max_tokens: int) -> LLMReply:
        raise NotImplementedError

    def complete(
        self,
        prompt: str,
        system: str | None = None,
        max_tokens: int | None = None,
        connect_retries: int = CONNECT_RETRIES,
    ) -> LLMReply:
        """One reply, retried with exponential back-off; LLMError when none came.

        A request that reaches no server at all (connection refused, unknown host) is retried
        at most `connect_retries` times, a second apart: a dead endpoint fails in seconds."""
        system = system if system is not None else self.system
        max_tokens = max_tokens or self.max_tokens
        retries: list[str] = []
        start = time.monotonic()

        def give_up(state: RetryCallState) -> bool:
            error = state.outcome.exception()
            return state.attempt_number > self.max_retries or (error.connect and state.attempt_number > connect_retries)

        def delay(state: RetryCallState) -> float:
            error = state.outcome.exception()
            if error.connect:
                seconds = min(self.backoff_s, CONNECT_BACKOFF_S)
            elif error.retry_after is not None:
                seconds = error.retry_after
            else:
                seconds = self.backoff_s * 2 ** (state.attempt_number - 1) * (0.5 + self._jitter.random())
            return min(seconds, self.max_backoff_s)

        def note(state: RetryCallState) -> None:
            retries.append(str(state.outcome.exception()))
            log.warning(
                "%s: attempt %d failed (%s); retrying in %.1fs",
                self.label,
                state.attempt_number,
                retries[-1],
                state.upcoming_sleep,
            )

        retrying = Retrying(
            retry=retry_if_exception_type(RetryableError),
            stop=give_up,
            wait=delay,
            sleep=self._sleep,
            before_sleep=note,
            reraise=True,
        )
        try:
            reply = retrying(self._send, prompt, system, max_tokens)
        except RetryableError as e:
            n = retrying.statistics.get("attempt_number", 1)
            raise LLMError(
                f"{self.label}: gave up after {n} attempt{'s' if n > 1 else ''}: {e}", status=e.status, attempts=n
            ) from None
        reply.latency_s = time.monotonic() - start
        reply.attempts = retrying.statistics.get("attempt_number", 1)
        reply.retries = retries
        if not reply.cost_usd:
            reply.cost_usd = self.cost(reply.input_tokens, reply.output_tokens)
        return reply

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return cost_usd(self.model, input_tokens, output_tokens, self.price)


def classify_status(label: str, status: int, message: str, headers) -> Exception:
    """An HTTP error status as RetryableError (try again) or a permanent LLMError."""
    if status in RETRY_STATUSES or status >= 500:
        return RetryableError(f"HTTP {status}: {message}", parse_retry_after(headers), status)
    hint = {401: " (check the API key)", 403: " (key lacks access)", 404: " (unknown model or wrong base URL)"}.get(
        status, ""
    )
    return LLMError(f"{label}: HTTP {status}{hint}: {message}", permanent=True, status=status)
