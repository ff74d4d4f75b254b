"""Baseline timings cached per (spec, shape, baseline kind, GPU, torch version, triton version).

The evaluator builds each key (kernelevolve.records.baselines.BaselineKey) from what it knows itself and
times a missing baseline in a process that never sees a candidate; a store only keeps key -> median
milliseconds. The experiment database is the store for searches and `kernelevolve eval`
(memory.repository.BaselineTable); `MemoryBaselineStore` keeps them for one process (tests, library use
without a database).
"""

from __future__ import annotations

import threading
from typing import Protocol

from kernelevolve.records.baselines import BaselineKey


class BaselineStore(Protocol):
    def lookup(self, fingerprint: str) -> dict[BaselineKey, float]:
        """Every timing of the spec with this fingerprint (the newest for each key)."""
        ...

    def save(self, key: BaselineKey, milliseconds: float) -> None:
        """Insert or replace one timing."""
        ...


class MemoryBaselineStore:
    def __init__(self) -> None:
        self._timings: dict[BaselineKey, float] = {}
        self._lock = threading.Lock()

    def lookup(self, fingerprint: str) -> dict[BaselineKey, float]:
        with self._lock:
            return {k: v for k, v in self._timings.items() if k.fingerprint == fingerprint}

    def save(self, key: BaselineKey, milliseconds: float) -> None:
        with self._lock:
            self._timings[key] = milliseconds
