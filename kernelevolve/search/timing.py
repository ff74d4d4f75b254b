"""Where a search's time goes: evaluations, rechecks, profiles, and waiting.

The engine fills `slots` places of its evaluator (--parallel). Every second of each place is one of:
evaluating a new candidate, re-evaluating a would-be best (a recheck), profiling a node, or waiting
(a free place with nothing to evaluate: the operator has not proposed the next candidate yet, or the
run is ending). The figures are place-seconds summed over the run's sessions; the shares are of their
total. Separately, profiles are held to a share of the GPU time (--profile-share): the seconds
profiles ran over the run's elapsed time times its GPUs, since a profile has its GPU to itself.

`TimeLedger` counts them on the engine's thread; `TimeSpent` is what progress displays and the
run's stored settings (`time_spent`) get.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

KINDS = ("evaluating", "rechecking", "profiling", "waiting")


@dataclass(frozen=True)
class TimeSpent:
    evaluating_s: float = 0.0  # place-seconds, all sessions of the run
    rechecking_s: float = 0.0
    profiling_s: float = 0.0
    waiting_s: float = 0.0
    elapsed_s: float = 0.0  # the run's search time (all sessions)
    slots: int = 1  # evaluator places the engine fills (this session's)
    gpus: int = 1
    profile_share: float | None = None  # the limit (--profile-share); None: no profiles
    profiles: int = 0  # profiles taken (started and finished) in the run

    @property
    def total_s(self) -> float:
        return self.evaluating_s + self.rechecking_s + self.profiling_s + self.waiting_s

    def share(self, kind: str) -> float:
        """The part of all place-seconds spent on `kind` (one of KINDS), 0..1."""
        total = self.total_s
        return getattr(self, f"{kind}_s") / total if total > 0 else 0.0

    @property
    def profile_gpu_share(self) -> float:
        """Seconds profiling over elapsed seconds times GPUs: what --profile-share limits."""
        capacity = self.elapsed_s * max(1, self.gpus)
        return self.profiling_s / capacity if capacity > 0 else 0.0

    def line(self) -> str:
        """`time: evaluating 71%, rechecking 9%, profiling 6%, waiting 14%` (of the evaluator's places)."""
        if self.total_s <= 0:
            return "time: nothing yet"
        return "time: " + ", ".join(f"{k} {self.share(k):.0%}" for k in KINDS)

    def profile_text(self) -> str:
        """`profiles: 3 (41 s), 6.2% of GPU time (limit 10%)`, or that the run takes none."""
        if self.profile_share is None:
            return "profiles: off"
        return (
            f"profiles: {self.profiles} ({self.profiling_s:.0f} s), {self.profile_gpu_share:.1%} of GPU time "
            f"(limit {self.profile_share:.0%})"
        )

    def summary(self) -> str:
        """The end-of-run line: the breakdown in seconds and shares, and the profiles' GPU share."""
        parts = ", ".join(f"{k} {getattr(self, f'{k}_s'):.0f} s ({self.share(k):.0%})" for k in KINDS)
        return (
            f"time over {self.slots} evaluator place{'s' if self.slots != 1 else ''} and "
            f"{self.elapsed_s:.0f} s: {parts}; {self.profile_text()}"
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["profile_gpu_share"] = round(self.profile_gpu_share, 4)
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "TimeSpent":
        if not d:
            return cls()
        fields = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in fields})


class TimeLedger:
    """Place-seconds by kind, counted by the engine as work starts and ends (one thread)."""

    def __init__(self, slots: int, gpus: int, profile_share: float | None, before: TimeSpent | None = None) -> None:
        self.slots, self.gpus, self.profile_share = slots, gpus, profile_share
        before = before or TimeSpent()
        self.seconds = {k: getattr(before, f"{k}_s") for k in KINDS}
        self.profiles = before.profiles
        self._busy = 0  # places taken by evaluations, rechecks and profiles now
        self._last = time.monotonic()

    def tick(self, busy: int) -> None:
        """Count the free places since the last tick as waiting; `busy` places are taken from now on."""
        now = time.monotonic()
        self.seconds["waiting"] += max(0, self.slots - self._busy) * (now - self._last)
        self._last, self._busy = now, busy

    def add(self, kind: str, seconds: float) -> None:
        self.seconds[kind] += max(0.0, seconds)
        if kind == "profiling":
            self.profiles += 1

    def spent(self, elapsed_s: float) -> TimeSpent:
        return TimeSpent(
            evaluating_s=self.seconds["evaluating"],
            rechecking_s=self.seconds["rechecking"],
            profiling_s=self.seconds["profiling"],
            waiting_s=self.seconds["waiting"],
            elapsed_s=elapsed_s,
            slots=self.slots,
            gpus=self.gpus,
            profile_share=self.profile_share,
            profiles=self.profiles,
        )
