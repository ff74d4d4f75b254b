"""The evaluator's side of the outside-timed loops (harness/runtime/outside.py has the process's side
and the why): release each loop when its process says it is ready, and time it until its `done` file
appears, with this process's clock. The file is read the moment it is seen: what the candidate's
process writes after that does not count.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

POLL_S = 0.0002


@dataclass
class Loop:
    name: str
    payload: dict  # what the release said: {"seed", "calls"}
    wall_ms: float  # release to done, measured here
    reported: dict  # the done file's content as read at that moment ({"digests": [...]})


class OutsideClock:
    """Watches one process's folder for the loops `names` (in order), in a thread of its own."""

    def __init__(self, folder: Path, names: list[str], plan: Callable[[str, str], dict], alive: Callable[[], bool]):
        self.folder, self.names, self.plan, self.alive = Path(folder), names, plan, alive
        self.loops: dict[str, Loop] = {}
        self._thread = threading.Thread(target=self._run, name=f"outside-clock-{self.folder.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for name in self.names:
            ready = self.folder / f"ready.{name}"
            while not ready.exists():
                if not self.alive() and not ready.exists():
                    return
                time.sleep(10 * POLL_S)
            payload = self.plan(name, _read_small(ready))
            tmp = self.folder / f".release.{name}.tmp"
            tmp.write_text(json.dumps(payload))
            done = self.folder / f"done.{name}"
            start = time.perf_counter()
            os.replace(tmp, self.folder / f"release.{name}")
            while not done.exists():
                if not self.alive() and not done.exists():  # ended: what it wrote before that still counts
                    return
                time.sleep(POLL_S)
            wall_ms = (time.perf_counter() - start) * 1e3
            try:
                reported = json.loads(_read_small(done))
            except ValueError:
                reported = {}
            self.loops[name] = Loop(name, payload, wall_ms, reported if isinstance(reported, dict) else {})

    def join(self, timeout: float = 10.0) -> dict[str, Loop]:
        self._thread.join(timeout)
        return dict(self.loops)


def _read_small(path: Path, limit: int = 1 << 16) -> str:
    """A small regular file's text, never following a link or blocking on a FIFO; '' otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
