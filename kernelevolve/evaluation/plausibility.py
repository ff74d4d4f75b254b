"""Marks for results a person should look at before anyone believes them.

`suspicious`: an implied bandwidth or throughput above the hardware's datasheet peak (the spec's
`bytes`/`flops` against the knowledge base's hardware document; the datasheet figure itself is the
margin: on the H200 it is 13% above the copy bandwidth measured, 4249 of 4800 GB/s), or, for a spec that
gives neither `bytes` nor `flops` (no physics to check against), a speedup above a bound (default 10x).
A correct kernel that is honestly many times faster than its baseline (the block-diagonal attention
references, 8-20x over SDPA with a dense mask) is not held. The evaluator adds a third reason: a
latency below what the outside-timed loop allows (verdict.bound_latencies). `unstable`: a fresh
re-evaluation's timings disagree.
"""

from __future__ import annotations

import functools

from kernelevolve.records.result import EvalResult

SPEEDUP_BOUND = 10.0
RECHECK_TOLERANCE = 0.15  # per-shape latency may differ this much (relative) between two evaluations
# ...or by this much in absolute terms: a launch-bound call of a few microseconds moves by ~0.6 us
# between processes (mbdt at 2048x2x4 on an H200: 0.0046 then 0.0040 ms, 16%), which is launch jitter.
RECHECK_FLOOR_MS = 0.001


@functools.lru_cache(maxsize=None)  # read once per process, not once per evaluation
def hardware_peaks(hardware: str) -> tuple[float | None, float | None]:
    """(GB/s, TFLOP/s) from knowledge_base/hardware/<hardware>.md front matter; None where absent."""
    from kernelevolve.knowledge.frontmatter import split_front_matter
    from kernelevolve.paths import KNOWLEDGE_BASE

    path = KNOWLEDGE_BASE / "hardware" / f"{hardware.lower()}.md"
    try:
        header, _ = split_front_matter(path.read_text(), path)
    except Exception:  # no document for this hardware, or one we cannot read: no peak check
        return None, None
    gb, tf = header.get("peak_gbps"), header.get("peak_tflops")
    return (float(gb) if isinstance(gb, (int, float)) else None, float(tf) if isinstance(tf, (int, float)) else None)


def suspicious(result: EvalResult, hardware: str, bound: float = SPEEDUP_BOUND) -> str | None:
    """Why a timed, correct result is implausible, or None."""
    if not result.correct or not result.timed:
        return None
    peak_gb, peak_tf = hardware_peaks(hardware)
    for s in result.shapes:
        where = f"{s.label}"
        physics = (peak_gb and s.gbps is not None) or (peak_tf and s.tflops is not None)
        if not physics and s.speedup is not None and s.speedup > bound:
            return f"{s.speedup:.1f}x over the baseline at {where}, above the {bound:g}x bound"
        if peak_gb and s.gbps and s.gbps > peak_gb:
            return f"{s.gbps:.0f} GB/s at {where}, above the {hardware} peak of {peak_gb:.0f} GB/s"
        if peak_tf and s.tflops and s.tflops > peak_tf:
            return f"{s.tflops:.0f} TFLOP/s at {where}, above the {hardware} peak of {peak_tf:.0f} TFLOP/s"
    return None


def disagreement(first: EvalResult, second: EvalResult, tolerance: float = RECHECK_TOLERANCE) -> str | None:
    """Why two evaluations of one candidate disagree (correctness or latency beyond noise), or None."""
    if not second.correct:
        return f"the re-evaluation failed ({second.failure}): {second.message}"
    for a, b in zip(first.shapes, second.shapes):
        if a.latency_ms and b.latency_ms:
            rel = abs(a.latency_ms - b.latency_ms) / min(a.latency_ms, b.latency_ms)
            if rel > tolerance and abs(a.latency_ms - b.latency_ms) > RECHECK_FLOOR_MS:
                return (
                    f"{a.label}: {a.latency_ms:.4f} ms then {b.latency_ms:.4f} ms in a fresh process "
                    f"({100 * rel:.0f}% apart, more than {100 * tolerance:.0f}%)"
                )
    return None
