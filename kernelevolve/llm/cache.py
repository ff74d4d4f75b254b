"""Reply cache: a resumed (or repeated) run does not pay twice for the same prompt.

Keyed by sha256 over (provider, model, temperature, system, prompt). Each key holds a list of
replies: the n-th identical request within one operator's life takes the n-th stored reply, so
two drafts from the same prompt still get two samples, and a run replayed from the start
gets the same replies in the same order without a single paid call.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from kernelevolve.llm.base import LLMReply


def cache_key(provider: str, model: str, temperature: float | None, prompt: str, system: str | None = None) -> str:
    payload = json.dumps([provider, model, temperature, system or "", prompt], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class ReplyCache:
    """Files under `root` (default: paths.cache_dir()/llm_replies), one JSON file per key."""

    def __init__(self, root: str | Path | None = None):
        if root is None:
            from kernelevolve import paths

            root = paths.cache_dir() / "llm_replies"
        self.root = Path(root)
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _read(self, key: str) -> list[dict]:
        try:
            return json.loads(self._path(key).read_text())["replies"]
        except (OSError, ValueError, KeyError, TypeError):
            return []  # missing or damaged: treat as a miss

    def get(self, key: str, index: int = 0) -> LLMReply | None:
        with self._lock:
            replies = self._read(key)
        if index >= len(replies):
            return None
        r = replies[index]
        return LLMReply(text=r["text"], input_tokens=r.get("input_tokens", 0), output_tokens=r.get("output_tokens", 0),
                        cost_usd=0.0, cached=True)

    def put(self, key: str, reply: LLMReply, index: int) -> None:
        """Store `reply` as the `index`-th sample for `key` (kept if one is already there)."""
        with self._lock:
            replies = self._read(key)
            if index < len(replies):
                return
            replies.append({"text": reply.text, "input_tokens": reply.input_tokens,
                            "output_tokens": reply.output_tokens, "cost_usd": reply.cost_usd})
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"replies": replies}, ensure_ascii=False))
            os.replace(tmp, path)
