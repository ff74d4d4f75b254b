"""One GPU shared by several evaluations: checks run side by side, timings run alone.

A candidate's correctness check, and the preparation of a timing process (inputs, the reference's
outputs, the baseline's compile), use the GPU in short bursts and may overlap one another; a timed
phase (baseline or candidate) must have the GPU to itself, or its medians measure the neighbours.
So the gate is a readers-writer lock that prefers writers: once a timing waits, no new check
starts on that GPU until the timing is done, and a stream of checks can never starve it. Memory
is the other limit: an evaluation waits to get onto a GPU until what it needs fits there.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager


class GpuGate:
    def __init__(self, memory_bytes: int | None = None, max_sharing: int = 4) -> None:
        # Checks at production shapes keep float64 references of every trial on the GPU (40 GB for
        # softmax's five shapes), and a prepared timing process keeps its inputs and expected outputs
        # until it has timed: evaluations are let onto a GPU while their memory fits (`resident`).
        self.memory_bytes = memory_bytes
        self.max_sharing = max_sharing
        self._resident: list[int] = []  # the memory each evaluation on this GPU was let on with
        self._queue: list[int] = []  # tickets of evaluations waiting to get on, in arrival order
        self._tickets = 0
        self._cond = threading.Condition()
        self._sharing = 0  # checks and preparations using the GPU now
        self._timing = False  # a timed phase holds the GPU
        self._timings_waiting = 0
        self.waited_s = 0.0  # how long timed phases waited for the GPU (where throughput goes)

    @contextmanager
    def resident(self, need_bytes: int | None):
        """An evaluation's whole stay on this GPU: it waits until `need_bytes` fit beside those already
        on it (unknown: until it is alone); one evaluation always gets on."""

        def fits() -> bool:
            if self._queue[0] != ticket:  # first come, first on: a large need is not passed forever
                return False
            if not self._resident:
                return True
            if need_bytes is None or self.memory_bytes is None:
                return False
            return sum(self._resident) + need_bytes <= self.memory_bytes

        # Unknown, it counts as the whole GPU: nothing gets on beside it either.
        held = need_bytes if need_bytes is not None else (self.memory_bytes or 0)
        with self._cond:
            ticket = self._tickets = self._tickets + 1
            self._queue.append(ticket)
            self._cond.wait_for(fits)
            self._queue.remove(ticket)
            self._resident.append(held)
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._resident.remove(held)
                self._cond.notify_all()

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
