"""The roofline line: achieved GB/s and TFLOP/s (the spec's `bytes`/`flops` over a latency) as
fractions of the GPU's peaks, and which roof bounds the kernel.

Peaks come from the hardware document's front matter in knowledge_base/hardware/: the measured
figures (`measured_gbps`, `measured_tflops`: what a copy and a large matmul reach on that GPU)
where present, else the datasheet's (`peak_gbps`, `peak_tflops`).

Bound: the roof the kernel is closer to, unless it is far from both (the larger fraction below
LATENCY_BELOW): then latency-bound: launches, too little parallelism, or waiting, not a resource.
"""

from __future__ import annotations

import functools

from kernelevolve.profiling.schema import Roofline

LATENCY_BELOW = 0.3


@functools.lru_cache(maxsize=None)
def peaks(hardware: str) -> tuple[float | None, float | None, str]:
    """(GB/s, TFLOP/s, "measured" | "datasheet" | "measured GB/s, datasheet TFLOP/s" | "none")."""
    from kernelevolve.knowledge.frontmatter import split_front_matter
    from kernelevolve.paths import KNOWLEDGE_BASE

    path = KNOWLEDGE_BASE / "hardware" / f"{hardware.lower()}.md"
    try:
        header, _ = split_front_matter(path.read_text(), path)
    except Exception:  # no document for this hardware: no fractions, still GB/s and TFLOP/s
        return None, None, "none"

    def number(key: str) -> float | None:
        v = header.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    gb_m, tf_m = number("measured_gbps"), number("measured_tflops")
    gb, tf = gb_m or number("peak_gbps"), tf_m or number("peak_tflops")
    sources = {("measured" if m else "datasheet") for m, v in ((gb_m, gb), (tf_m, tf)) if v}
    source = (
        sources.pop()
        if len(sources) == 1
        else ("measured GB/s, datasheet TFLOP/s" if gb_m else "datasheet GB/s, measured TFLOP/s" if sources else "none")
    )
    return gb, tf, source


def roofline(
    latency_ms: float,
    latency_source: str,
    nbytes: float | None,
    flops: float | None,
    hardware: str,
    latency_below: float = LATENCY_BELOW,
) -> Roofline:
    peak_gb, peak_tf, source = peaks(hardware)
    gbps = nbytes / latency_ms / 1e6 if nbytes and latency_ms > 0 else None
    tflops = flops / latency_ms / 1e9 if flops and latency_ms > 0 else None
    mem = gbps / peak_gb if gbps is not None and peak_gb else None
    comp = tflops / peak_tf if tflops is not None and peak_tf else None
    known = [f for f in (mem, comp) if f is not None]
    if not known:
        bound = "unknown"
    elif max(known) < latency_below:
        bound = "latency"
    else:
        bound = "memory" if (mem or 0) >= (comp or 0) else "compute"
    return Roofline(
        latency_ms=latency_ms,
        latency_source=latency_source,
        gbps=gbps,
        tflops=tflops,
        peak_gbps=peak_gb,
        peak_tflops=peak_tf,
        peak_source=source,
        memory_fraction=mem,
        compute_fraction=comp,
        bound=bound,
    )
