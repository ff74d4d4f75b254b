"""Baseline timings cached per (spec, shape, GPU, torch version, triton version).

The key is built by the benchmark harness (it alone knows the GPU and versions it ran with);
this store only keeps key -> median milliseconds. A JSON file by default; the search engine may
hand the evaluator any object with the same two methods (e.g. one backed by its database).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Protocol

from kernelevolve.paths import cache_dir


class BaselineStore(Protocol):
    def lookup(self, prefix: str) -> dict[str, float]: ...

    def save(self, key: str, milliseconds: float) -> None: ...


class JsonBaselineStore:
    def __init__(self, path: Path | None = None):
        self.path = path or cache_dir() / "baselines.json"
        self._lock = threading.Lock()

    def _load(self) -> dict[str, float]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def lookup(self, prefix: str) -> dict[str, float]:
        """Every cached timing whose key starts with `prefix` (the spec's fingerprint)."""
        with self._lock:
            return {k: v for k, v in self._load().items() if k.startswith(prefix)}

    def save(self, key: str, milliseconds: float) -> None:
        with self._lock:
            data = self._load()
            data[key] = milliseconds
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
