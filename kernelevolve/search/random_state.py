"""A run's random stream as JSON and back: stored with every node and evaluation, so a resumed run
draws exactly the numbers the uninterrupted one would have drawn.

Apart from the engine because the run's lifecycle, campaigns and tests save and restore it too.
"""

from __future__ import annotations

import random


def rng_state(rng: random.Random) -> dict:
    version, internal, gauss = rng.getstate()
    return {"version": version, "internal": list(internal), "gauss": gauss}


def restore_rng(state: dict) -> random.Random:
    rng = random.Random()
    rng.setstate((state["version"], tuple(state["internal"]), state["gauss"]))
    return rng
