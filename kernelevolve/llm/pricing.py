"""List prices per million tokens (USD, input / output), for the cost column of each call.

Prices change; a model missing here costs 0 unless the run's price (KERNELEVOLVE_PRICE="IN,OUT",
USD per million input and output tokens, saved with the run) says otherwise. Local
OpenAI-compatible servers are free unless it is given.
"""

from __future__ import annotations

# Longest matching prefix wins (dated snapshots share their family's price).
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-5": (1.25, 10.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4o": (2.5, 10.0),
    "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4),
}


def price_per_mtok(model: str, price: tuple[float, float] | None = None) -> tuple[float, float]:
    """`price` (the run's own) when given, else the list's longest matching prefix, else free."""
    if price is not None:
        return float(price[0]), float(price[1])
    matches = [p for p in PRICES_PER_MTOK if model.startswith(p)]
    return PRICES_PER_MTOK[max(matches, key=len)] if matches else (0.0, 0.0)


def cost_usd(model: str, input_tokens: int, output_tokens: int, price: tuple[float, float] | None = None) -> float:
    inp, out = price_per_mtok(model, price)
    return (input_tokens * inp + output_tokens * out) / 1e6
