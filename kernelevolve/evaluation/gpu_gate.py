"""One GPU shared by several evaluations: checks run side by side, timings run alone.

A candidate's correctness check, and the preparation of a timing process (inputs, the reference's
outputs, the baseline's compile), use the GPU in short bursts and may overlap one another; a timed
phase (baseline or candidate) must have the GPU to itself, or its medians measure the neighbours.
So the gate is a readers-writer lock that prefers writers: once a timing waits, no new check
starts on that GPU until the timing is done, and a stream of checks can never starve it. At most
`max_sharing` checks share the GPU at once (its memory is the limit).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager


class GpuGate:
    def __init__(self, max_sharing: int = 2) -> None:
        # Checks at production shapes keep float64 references of every trial on the GPU (tens of GB
        # each at long rows): more than two side by side ran an H200 out of memory.
        self.max_sharing = max_sharing
        self._cond = threading.Condition()
        self._sharing = 0  # checks and preparations using the GPU now
        self._timing = False  # a timed phase holds the GPU
        self._timings_waiting = 0
        self.waited_s = 0.0  # how long timed phases waited for the GPU (where throughput goes)

    @contextmanager
    def shared(self):
        with self._cond:
            self._cond.wait_for(
                lambda: not self._timing and self._timings_waiting == 0 and self._sharing < self.max_sharing
            )
            self._sharing += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharing -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        start = time.monotonic()
        with self._cond:
            self._timings_waiting += 1
            self._cond.wait_for(lambda: not self._timing and self._sharing == 0)
            self._timings_waiting -= 1
            self._timing = True
            self.waited_s += time.monotonic() - start
        try:
            yield
        finally:
            with self._cond:
                self._timing = False
                self._cond.notify_all()
