"""One model call, as the experiment database keeps it: written by the operators, stored by the
repository, shown by the review pages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LLMCallRecord:
    """One model call, for the experiment database (tokens and cost are the provider's)."""

    provider: str
    model: str
    prompt: str
    reply: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    attempts: int = 1  # requests the call took (retries included)
