"""GPU timing that a candidate cannot fool from inside its own process.

Every primitive is captured when the `Clock` is made, before the candidate is imported:
device-wide synchronisation, CUDA event record/elapsed (the C methods, not the Python
wrappers), `time.perf_counter`, and the tensor methods used to refresh inputs and flush the L2.
Timed calls rotate over two input buffer sets whose values are refreshed before every call from
two value pools, so an output cached on a pointer is stale; some timed calls' outputs are kept
for checking against the reference. Total wall time is cross-checked against the events.

Each timed call is preceded on the stream by a GPU spin at least as long as the host takes to enqueue
the call, so the GPU reaches the start event with the whole call already queued: the events see the
kernels, not the host's launch time. Without it, a host slowed by other processes (several
evaluations in flight on one machine) let its launch gaps into the timed region: a 0.144 ms conv1d
kernel measured 0.212 ms in a search with four evaluations in flight.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field

import torch

FLUSH_BYTES = 256 << 20  # larger than any current GPU's L2 (H200: 50 MB)
LEAD_MAX_MS = 2.0  # the spin never exceeds this: a call whose host side takes longer pays for it
LEAD_MIN_MS = 0.02


def lead_ms(host_ms: list[float]) -> float:
    """How long the GPU should spin before a timed call whose enqueue took `host_ms` on the host.

    Twice the 90th percentile of the enqueue times seen (a call the OS preempts for longer falls
    outside the median anyway), at least LEAD_MIN_MS, at most LEAD_MAX_MS."""
    if not host_ms:
        return LEAD_MAX_MS
    ordered = sorted(host_ms)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return min(LEAD_MAX_MS, max(LEAD_MIN_MS, 2.0 * p90))


@dataclass
class Timing:
    median_ms: float
    calls: int
    wall_ms: float  # the timed loop, device-synchronised at both ends
    stream_ms: float  # sum over calls of (refresh + flush + spin + call) measured by events
    lead_ms: float = 0.0  # the GPU spin before each timed call (0: none)
    checked: list[tuple[int, int, list]] = field(default_factory=list)  # (call, pool, outputs)


class Clock:
    def __init__(self, device_index: int = 0, lead: bool = True):
        base = torch._C._CudaEventBase
        self._record, self._elapsed = base.record, base.elapsed_time
        self._sync = torch._C._cuda_synchronize
        self._new_event = torch.cuda.Event
        self._perf = time.perf_counter
        self._copy, self._zero, self._clone = torch.Tensor.copy_, torch.Tensor.zero_, torch.Tensor.clone
        self.stream = torch.cuda.current_stream(device_index)
        self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self._sleep = torch._C._cuda_sleep
        self._cycles_per_ms = self._calibrate_spin() if lead else None

    def _calibrate_spin(self) -> float:
        """GPU clock cycles per millisecond of `_cuda_sleep` (the second of two tries: clocks ramp)."""
        rate = 0.0
        for _ in range(2):
            a, b = self._event(), self._event()
            self.sync()
            self._record(a, self.stream)
            self._sleep(1_000_000)
            self._record(b, self.stream)
            self.sync()
            rate = 1_000_000 / max(self._elapsed(a, b), 1e-3)
        return rate

    def _spin(self, ms: float) -> None:
        if ms > 0 and self._cycles_per_ms:
            self._sleep(int(ms * self._cycles_per_ms))

    def sync(self) -> None:
        self._sync()

    def flush(self) -> None:
        """Evict the L2 (as before every timed call)."""
        self._zero(self._flush)

    def now(self) -> float:
        return self._perf()

    def _event(self):
        return self._new_event(enable_timing=True)

    def _refresh(self, buffers: list, values: list) -> None:
        for b, v in zip(buffers, values):
            if isinstance(b, torch.Tensor):
                self._copy(b, v)

    def measure(
        self,
        fn,
        buffer_sets: list[list],
        pools: list[list],
        *,
        warmup_ms: float,
        rep_ms: float,
        n_checked: int = 2,
        rng: random.Random | None = None,
        keep_outputs=None,
    ) -> Timing:
        """Median latency of `fn(*buffers)`; call i uses buffer set i % S refreshed from pool (i // S) % P.

        `keep_outputs(out) -> list` clones the outputs of the calls to be checked (the last call on
        each buffer set, and `n_checked` more at random); None keeps nothing (the baseline)."""
        S, P = len(buffer_sets), len(pools)

        def plan(i: int) -> tuple[list, list, int]:
            pool = (i // S) % P
            return buffer_sets[i % S], pools[pool], pool

        with torch.no_grad():
            # Estimate one iteration (refresh + flush + call) as do_bench does (its estimate includes
            # the flush), so the loop's wall time stays near warmup_ms + rep_ms.
            self.sync()
            est, host = [], []
            for i in range(5):
                bufs, vals, _ = plan(i)
                a, b = self._event(), self._event()
                self._record(a, self.stream)
                self._refresh(bufs, vals)
                self._zero(self._flush)
                h = self._perf()
                fn(*bufs)
                host.append((self._perf() - h) * 1e3)
                self._record(b, self.stream)
                self.sync()
                est.append(self._elapsed(a, b))
            estimate = max(statistics.median(est), 1e-4)
            n_warm = max(1, int(warmup_ms / estimate))
            for i in range(n_warm):
                bufs, vals, _ = plan(i)
                self._refresh(bufs, vals)
                h = self._perf()
                fn(*bufs)
                host.append((self._perf() - h) * 1e3)
            # Sized from the warm calls where there are enough (the first five may still compile).
            lead = lead_ms(host[5:] if len(host) > 10 else host) if self._cycles_per_ms else 0.0
            n_rep = min(10000, max(10, int(rep_ms / (estimate + lead))))
            rng = rng or random.Random()
            check = set(range(n_rep - S, n_rep)) | set(rng.sample(range(n_rep - S), min(n_checked, n_rep - S)))
            pre = [self._event() for _ in range(n_rep)]
            start = [self._event() for _ in range(n_rep)]
            end = [self._event() for _ in range(n_rep)]
            checked = []
            self.sync()
            t0 = self._perf()
            for i in range(n_rep):
                bufs, vals, pool = plan(i)
                self._record(pre[i], self.stream)
                self._refresh(bufs, vals)
                self._zero(self._flush)
                self._spin(lead)
                self._record(start[i], self.stream)
                out = fn(*bufs)
                self._record(end[i], self.stream)
                if keep_outputs is not None and i in check:
                    checked.append((i, pool, keep_outputs(out)))
            self.sync()
            wall_ms = (self._perf() - t0) * 1e3
        times = [self._elapsed(s, e) for s, e in zip(start, end)]
        stream_ms = sum(self._elapsed(p, e) for p, e in zip(pre, end))
        return Timing(
            median_ms=float(statistics.median(times)),
            calls=n_rep,
            wall_ms=wall_ms,
            stream_ms=stream_ms,
            lead_ms=lead,
            checked=checked,
        )


def cross_check(t: Timing) -> str | None:
    """None when the events and the wall clock tell the same story; else what disagrees."""
    timed = t.median_ms * t.calls
    if timed > t.wall_ms * 1.05 + 0.5:
        return f"timed calls add up to {timed:.3f} ms but the loop took {t.wall_ms:.3f} ms of wall time"
    if t.stream_ms < 0.5 * t.wall_ms - 5.0:
        return (
            f"the timed stream was busy {t.stream_ms:.3f} ms of a {t.wall_ms:.3f} ms loop: "
            f"the work ran outside the timed region"
        )
    return None
