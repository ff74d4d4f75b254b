"""What a profile tells the offline operator: register spills (local-memory traffic in ncu's
metrics) are cured by fewer warps or smaller tiles, so a spilling parent's next step moves one
resource knob (warps, block/tile sizes, elements per thread, stages) a step down."""

from __future__ import annotations

import random
import re

from kernelevolve.operators import config_search as search

RESOURCE_KNOB = re.compile(r"warps|block|tile|elems|stages", re.IGNORECASE)


def spill_step(profile, config: dict, tunables: dict[str, list], tried: set[tuple], rng: random.Random) -> dict | None:
    """A configuration one resource knob smaller when `profile` (a NodeProfile) shows spills; else None."""
    if profile is None or not getattr(profile, "spills", False):
        return None
    knobs = {k: v for k, v in tunables.items() if RESOURCE_KNOB.search(k)}
    return search.smaller_first(config, knobs, tried, rng) if knobs else None
