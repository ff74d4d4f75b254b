"""A profiling tool written the way a new one is, in one module: its record (TOOL), its part's schema,
parser and lines, and its harness `main(config)` (which the sandbox runs through the one profiling
template, importing this module by the name the record gives). It times each forward call with the
host's wall clock, so it runs under the interpreter too."""

from __future__ import annotations

import json
import os
import statistics
import sys

from pydantic import BaseModel

from kernelevolve.harness.runtime import profiled
from kernelevolve.profiling.tools.base import Line, ProfileParseError, ProfilerTool, read_json


class WallClock(BaseModel):
    calls: int
    ms_per_call: float  # the median
    note: str  # the config key of its own, as the harness got it


def main(config: dict) -> None:
    import time

    import torch

    result, device = profiled.begin(config, "wallclock")
    for case in profiled.prepare(config, result, device):
        result.stage(f"{case.label} wallclock")
        times = []
        with torch.no_grad():
            for _ in range(config["calls"]):
                t0 = time.perf_counter()
                case.model(*case.inputs)
                times.append((time.perf_counter() - t0) * 1e3)
        name = f"wallclock_{case.index}.json"
        with open(os.path.join(config["output_dir"], name), "w") as f:
            json.dump({"ms": times, "note": config["wallclock_note"]}, f)
        result.cases.append({"label": case.label, "output": name})
        result.write()
    result.finish()


def parse(text: str, calls: int) -> WallClock:
    data = read_json(text, "wall clock")
    if not isinstance(data, dict) or not data.get("ms"):
        raise ProfileParseError("wall clock: no 'ms' list")
    return WallClock(calls=len(data["ms"]), ms_per_call=statistics.median(data["ms"]), note=data["note"])


TOOL = ProfilerTool(
    name="wallclock",
    what="the host's clock",
    output="wall-clock JSON",
    harness=sys.modules[__name__],
    part=WallClock,
    parse=parse,
    prompt=lambda p, max_kernels: [f"wall clock: {p.ms_per_call:.3f} ms per call over {p.calls} calls"],
    report=lambda p: [Line(f"wall clock: {p.ms_per_call:.3f} ms per call ({p.note})")],
    on_interpreter=True,
    config=lambda timeout_s: {"wallclock_note": f"within {timeout_s:g} s"},
    latency=lambda p: p.ms_per_call,
    latency_rank=9,
)
