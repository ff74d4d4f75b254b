"""What one cached baseline timing is of: a spec's reference at one case, timed as one baseline kind on one
GPU with one torch and one Triton (kernelevolve/evaluation/baselines.py's stores keep key -> milliseconds).

The evaluator builds each key from what it knows itself, never from what a candidate's process reported.
The experiment database keeps a key in the columns of its `baseline_timings` table, the kind and versions
together in one `software` column (`software`, `from_columns`: the only place that text is joined or split).
"""

from __future__ import annotations

from dataclasses import dataclass

OUTSIDE_LOOP = ":outside-v3"  # a kind's suffix for the wall time of its outside-timed loop (not a latency)


@dataclass(frozen=True)
class BaselineKey:
    fingerprint: str  # the spec's (its reference module's)
    shape: str  # the case's label
    kind: str  # eager | torch.compile, or either + OUTSIDE_LOOP
    gpu: str  # the GPU's name
    torch: str
    triton: str

    def outside_loop(self) -> "BaselineKey":
        """The key of this baseline's outside-timed loop's wall time, stored beside its latency."""
        return BaselineKey(self.fingerprint, self.shape, self.kind + OUTSIDE_LOOP, self.gpu, self.torch, self.triton)

    @property
    def software(self) -> str:
        """The database's `software` column: kind, torch and Triton."""
        return "|".join((self.kind, self.torch, self.triton))

    @classmethod
    def from_columns(cls, fingerprint: str, shape: str, gpu: str, software: str) -> "BaselineKey":
        """A key from the database's columns (a `software` written by an older version may lack versions)."""
        kind, torch, triton = (software.split("|") + ["", "", ""])[:3]
        return cls(fingerprint, shape, kind, gpu, torch, triton)
