"""Fitting a prompt's context into a token budget, deterministically.

A prompt is a template filled with named sections. Each optional section has a priority and
a list of items (ancestry entries, insights, documents); when the rendered prompt is over the
budget (tokens estimated as characters / 4), the lowest-priority section loses items from its
less useful end, then is shortened character-wise, then dropped, before the next one is touched.
Same inputs, same prompt: no randomness, no dict-order surprises (ties broken by name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

CHARS_PER_TOKEN = 4
MIN_SECTION_CHARS = 400  # shorter than this a cut section is noise: drop it instead


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass
class Section:
    name: str
    items: list[str]
    priority: int  # higher survives longer; `required` sections are never cut
    keep: str = "head"  # which end survives a cut: "head" (first items/chars) or "tail" (last ones)
    required: bool = False
    joiner: str = "\n"
    cut_note: str = ""  # set when the section was shortened

    @property
    def text(self) -> str:
        body = self.joiner.join(self.items)
        if self.cut_note:
            body = f"{self.cut_note}\n{body}" if self.keep == "tail" else f"{body}\n{self.cut_note}"
        return body

    def __len__(self) -> int:
        return len(self.text)


@dataclass
class Fitted:
    prompt: str
    tokens: int
    cuts: list[str] = field(default_factory=list)  # what was shortened or dropped, for the record


def fit(sections: list[Section], render: Callable[[dict[str, str]], str], budget_tokens: int) -> Fitted:
    """Render with every section, cutting optional ones (lowest priority first) until it fits."""
    sections = [Section(s.name, list(s.items), s.priority, s.keep, s.required, s.joiner) for s in sections]

    def rendered() -> str:
        return render({s.name: s.text for s in sections if s.items})

    prompt = rendered()
    cuts: list[str] = []
    order = sorted((s for s in sections if not s.required), key=lambda s: (s.priority, s.name))
    for section in order:
        over = estimate_tokens(prompt) - budget_tokens
        if over <= 0:
            break
        excess_chars = over * CHARS_PER_TOKEN
        dropped_items = 0
        # Whole items first, from the end that matters less.
        while len(section.items) > 1 and excess_chars > 0:
            item = section.items.pop(-1 if section.keep == "head" else 0)
            excess_chars -= len(item) + len(section.joiner)
            dropped_items += 1
        if dropped_items:
            section.cut_note = (
                f"[{dropped_items} more entr{'y' if dropped_items == 1 else 'ies'} left out to fit the context budget]"
            )
        if excess_chars > 0 and section.items:
            text = section.joiner.join(section.items)
            room = len(text) - excess_chars - 80
            if room < MIN_SECTION_CHARS:
                section.items = []
                cuts.append(f"dropped {section.name}")
            else:
                section.items = [text[:room] if section.keep == "head" else text[-room:]]
                section.cut_note = f"[{len(text) - room} characters cut to fit the context budget]"
                cuts.append(f"shortened {section.name}")
        elif dropped_items:
            cuts.append(f"shortened {section.name} by {dropped_items} entries")
        prompt = rendered()
    return Fitted(prompt, estimate_tokens(prompt), cuts)
