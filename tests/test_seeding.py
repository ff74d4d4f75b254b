"""tests/seeding.py: the same draws on every run, and a failing test names its seed and how to replay it."""

import os
import random
import re
import subprocess
import sys

import numpy as np
import torch

from tests.seeding import ENV, seed, seed_everything, seed_for  # noqa: F401  (seed: the fixture)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILING = """
from tests.seeding import seed  # noqa: F401

def test_draws(seed):
    print("SEED", seed)
    assert False, "fails on purpose"
"""


def test_seeds_are_stable_per_test_and_chosen_by_the_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert seed_for("tests/a.py::test_x") == seed_for("tests/a.py::test_x") != seed_for("tests/a.py::test_y")
    monkeypatch.setenv(ENV, "12345")
    assert seed_for("tests/a.py::test_x") == seed_for("tests/a.py::test_y") == 12345
    monkeypatch.setenv(ENV, "random")
    assert len({seed_for("tests/a.py::test_x") for _ in range(5)}) > 1


def test_seed_everything_repeats_random_numpy_and_torch():
    def draws():
        return random.random(), float(np.random.rand()), torch.rand(1).item()

    seed_everything(7)
    first = draws()
    seed_everything(7)
    assert draws() == first
    seed_everything(8)
    assert all(a != b for a, b in zip(draws(), first))


def test_the_fixture_seeds_with_the_tests_own_seed(seed, request):
    assert seed == seed_for(request.node.nodeid)
    expected = random.Random(seed).random()
    assert random.random() == expected  # the global stream was seeded before the test began


def test_a_failure_prints_the_seed_and_the_replay_command(tmp_path):
    (tmp_path / "test_drawing.py").write_text(FAILING)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_drawing.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    seed = re.search(r"SEED (\d+)", proc.stdout).group(1)
    assert f"seed {seed}; replay: {ENV}={seed} python -m pytest 'test_drawing.py::test_draws'" in proc.stdout
