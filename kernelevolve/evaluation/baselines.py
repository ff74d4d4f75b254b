"""Baseline timings cached per (spec, shape, baseline kind, GPU, torch version, triton version).

The evaluator builds each key from what it knows itself and times a missing baseline in a process
that never sees a candidate; a store only keeps key -> median milliseconds. The experiment
database is the store for searches and `kernelevolve eval` (memory.repository.BaselineTable);
`MemoryBaselineStore` keeps them for one process (tests, library use without a database).
"""

from __future__ import annotations

import threading
from typing import Protocol


class BaselineStore(Protocol):
    def lookup(self, prefix: str) -> dict[str, float]: ...

    def save(self, key: str, milliseconds: float) -> None: ...


class MemoryBaselineStore:
    def __init__(self) -> None:
        self._timings: dict[str, float] = {}
        self._lock = threading.Lock()

    def lookup(self, prefix: str) -> dict[str, float]:
        with self._lock:
            return {k: v for k, v in self._timings.items() if k.startswith(prefix)}

    def save(self, key: str, milliseconds: float) -> None:
        with self._lock:
            self._timings[key] = milliseconds
