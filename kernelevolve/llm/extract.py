"""Taking the kernel out of a model's reply.

The contract asks for one fenced ```python block holding a whole module that defines
`class ModelNew`. Models do not always comply: several blocks (a sketch, then the full module),
a reply cut off inside its block by the token limit, or bare code without fences. A syntax error
is still code (the evaluator classifies it as `syntax`); only a reply with no `ModelNew` at all
is `no_code`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# An opening fence with an optional language tag, then everything up to a closing fence or the
# end of the reply (a reply truncated by max_tokens leaves its last block open).
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.M)
_CODE_START = re.compile(r"^(import |from |@|class |def |#|[A-Za-z_][A-Za-z_0-9]* *=)")
_CODE_LANGS = {"", "python", "py", "python3", "triton"}


@dataclass
class Extraction:
    source: str | None
    message: str  # why nothing usable was found, or which block was taken


def extract_kernel(reply: str) -> Extraction:
    """The candidate module in `reply`, or None with a one-line reason."""
    if not reply or not reply.strip():
        return Extraction(None, "empty reply")
    blocks = [(lang.lower(), body) for _, lang, body in _FENCE.findall(reply)]
    code_blocks = [body for lang, body in blocks if lang in _CODE_LANGS]
    with_model = [b for b in code_blocks if _MODEL_NEW.search(b)]
    if with_model:
        # Prefer the last complete-looking module: a trailing snippet much shorter than the
        # longest block is usually an excerpt of it, not the final answer.
        longest = max(len(b) for b in with_model)
        chosen = [b for b in with_model if len(b) >= longest / 2][-1]
        return Extraction(
            chosen.rstrip() + "\n", f"took code block {code_blocks.index(chosen) + 1} of {len(code_blocks)}"
        )
    if blocks:
        return Extraction(None, f"reply has {len(blocks)} code block(s) but none defines class ModelNew")
    if _MODEL_NEW.search(reply):
        lines = reply.splitlines()
        start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
        return Extraction("\n".join(lines[start:]).rstrip() + "\n", "took unfenced code")
    return Extraction(None, f"reply has no code and no class ModelNew ({len(reply)} chars of text)")
