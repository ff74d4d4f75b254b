"""The opt-in reply cache (`kernelevolve run --reply-cache`, or KERNELEVOLVE_REPLY_CACHE=1).

Off by default: a new search asks the model afresh (a cache that replays old replies makes a run
against a dead server "find" kernels, and repeats the same search). A resumed run never pays
twice without it: it replays its own recorded calls from the experiment database (see
LLMOperator.replay). With the cache on, replies are stored in the experiment database
(`DatabaseReplyCache`, table reply_cache of the `--db` database: the one store a team shares and
a run already uses), keyed by sha256 over everything that changes a reply: provider, model, endpoint (base URL),
temperature, reply token limit, system prompt and prompt (the prompt holds the spec, shapes,
dtypes, tolerances and device). Each key holds a list: the n-th identical request within one
operator's life takes the n-th stored reply, so two drafts from one prompt are still two samples.
`kernelevolve cache clear` deletes them. `ReplyCache` keeps the same in files, for library use
without a database (an LLMOperator built by resolve_operator(use_cache=True) starts with it; the
command line swaps in the database's).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from kernelevolve.llm.base import LLMReply


def cache_key(settings: dict, prompt: str, system: str | None = None) -> str:
    """`settings`: Provider.settings() (provider, model, endpoint, temperature, max_tokens)."""
    payload = json.dumps([sorted(settings.items()), system or "", prompt], ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def default_root() -> Path:
    from kernelevolve import paths

    return paths.cache_dir() / "llm_replies"


def clear(root: str | Path | None = None) -> int:
    """Delete every cached reply; the number of keys removed."""
    import shutil

    root = Path(root) if root is not None else default_root()
    if not root.exists():
        return 0
    count = sum(1 for _ in root.glob("*/*.json"))
    shutil.rmtree(root)
    return count


class ReplyCache:
    """Files under `root` (default: paths.cache_dir()/llm_replies), one JSON file per key."""

    def __init__(self, root: str | Path | None = None):
        if root is None:
            root = default_root()
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
        return LLMReply(
            text=r["text"],
            input_tokens=r.get("input_tokens", 0),
            output_tokens=r.get("output_tokens", 0),
            cost_usd=0.0,
            cached=True,
        )

    def put(self, key: str, reply: LLMReply, index: int) -> None:
        """Store `reply` as the `index`-th sample for `key` (kept if one is already there)."""
        with self._lock:
            replies = self._read(key)
            if index < len(replies):
                return
            replies.append(
                {
                    "text": reply.text,
                    "input_tokens": reply.input_tokens,
                    "output_tokens": reply.output_tokens,
                    "cost_usd": reply.cost_usd,
                }
            )
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"replies": replies}, ensure_ascii=False))
            os.replace(tmp, path)


class DatabaseReplyCache:
    """The same interface as ReplyCache, in the experiment database (Repository.cached_reply)."""

    def __init__(self, repo):
        self.repo = repo

    def get(self, key: str, index: int = 0) -> LLMReply | None:
        row = self.repo.cached_reply(key, index)
        if row is None:
            return None
        return LLMReply(
            text=row.reply, input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost_usd=0.0, cached=True
        )

    def put(self, key: str, reply: LLMReply, index: int) -> None:
        self.repo.cache_reply(key, index, reply.text, reply.input_tokens, reply.output_tokens)
