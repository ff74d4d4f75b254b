"""`file:DIR`, for air-gapped use: the prompt is written to DIR/<sha>.prompt.md and the run
waits for a person (or another program) to put the answer in DIR/<sha>.reply.md.

A reply already present is used at once, so re-running a search replays the folder's answers.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

from kernelevolve.llm.base import LLMError, LLMReply, Provider


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


class FileProvider(Provider):
    name = "file"

    def __init__(self, folder: str | Path, *, wait_s: float = 3600.0, poll_s: float = 1.0, **options):
        options.setdefault("max_retries", 0)
        super().__init__(str(folder), **options)
        self.folder = Path(folder)
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.occurrences: dict[str, int] = {}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LLMError(f"file:{folder}: cannot create the folder ({e.strerror})", permanent=True) from None

    def check(self) -> None:
        """Nothing to reach: the folder was created (or found) in __init__; no question is asked."""

    def paths_for(self, prompt: str, system: str | None, occurrence: int = 0) -> tuple[Path, Path]:
        digest = hashlib.sha256(f"{system or ''}\n\n{prompt}\n{occurrence}".encode()).hexdigest()[:24]
        return self.folder / f"{digest}.prompt.md", self.folder / f"{digest}.reply.md"

    def _send(self, prompt: str, system: str | None, max_tokens: int) -> LLMReply:
        # The same prompt asked twice (two drafts) is two questions: number the occurrences.
        base = hashlib.sha256(f"{system or ''}\n\n{prompt}".encode()).hexdigest()
        occurrence = self.occurrences.get(base, 0)
        self.occurrences[base] = occurrence + 1
        prompt_path, reply_path = self.paths_for(prompt, system, occurrence)
        if not reply_path.exists():
            text = (f"<!-- system -->\n{system}\n\n<!-- user -->\n" if system else "") + prompt
            prompt_path.write_text(text)
            print(
                f"kernelevolve: waiting up to {self.wait_s:.0f} s for {reply_path} (prompt: {prompt_path})",
                file=sys.stderr,
                flush=True,
            )
        deadline = time.monotonic() + self.wait_s
        last_size = -1
        while True:
            if reply_path.exists():
                size = reply_path.stat().st_size
                if size == last_size and size > 0:  # stopped growing: the writer is done
                    break
                last_size = size
            if time.monotonic() > deadline:
                raise LLMError(
                    f"file:{self.folder}: no reply after {self.wait_s:.0f} s; write the answer to {reply_path} "
                    f"(prompt in {prompt_path.name}) and resume the run",
                    permanent=True,
                )
            time.sleep(self.poll_s)
        text = reply_path.read_text()
        return LLMReply(
            text=text, input_tokens=estimate_tokens(prompt + (system or "")), output_tokens=estimate_tokens(text)
        )

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return 0.0
