"""Every random draw in the tests is seeded, and a failing test prints its seed.

The `seed` fixture (autouse where a conftest imports it: tests/kernels, tests/search, tests/llm, tests/operators, tests/runs, ...)
seeds Python's `random`, numpy and torch before each test and hands the seed to tests that make
their own generators. The seed is stable from run to run (derived from the test's id), so CI is
reproducible; KERNELEVOLVE_TEST_SEED=N runs with seed N instead, and KERNELEVOLVE_TEST_SEED=random
draws a fresh one per test, to explore. A failing test's report carries a "seed" section with the
command that replays it.
"""

from __future__ import annotations

import os
import random
import secrets
import zlib

import pytest

ENV = "KERNELEVOLVE_TEST_SEED"


def seed_for(nodeid: str) -> int:
    chosen = os.environ.get(ENV, "").strip()
    if chosen == "random":
        return secrets.randbelow(2**31)
    if chosen:
        return int(chosen)
    return zlib.crc32(nodeid.encode()) & 0x7FFFFFFF


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass


@pytest.fixture(autouse=True)
def seed(request) -> int:
    """This test's seed; `random`, numpy and torch are already seeded with it."""
    value = seed_for(request.node.nodeid)
    seed_everything(value)
    request.node.add_report_section(
        "setup", "seed", f"seed {value}; replay: {ENV}={value} python -m pytest '{request.node.nodeid}'\n"
    )
    return value
