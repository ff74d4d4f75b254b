"""tests/seeding.py: the same draws on every run, and a failing test names its seed and how to replay it."""

import os
import re
import subprocess
import sys

from tests.seeding import ENV

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST = '''
import random
import torch
from tests.seeding import seed  # noqa: F401

def test_draws(seed):
    print("DRAWS", seed, random.random(), torch.rand(1).item(), random.Random(seed).random())
    assert False, "fails on purpose"
'''


def _run(tmp_path, env_seed=None):
    (tmp_path / "test_drawing.py").write_text(TEST)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if env_seed is not None:
        env[ENV] = env_seed
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_drawing.py")], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    draws = re.search(r"DRAWS (\d+) (\S+) (\S+) (\S+)", proc.stdout)
    return proc.stdout, draws.groups()


def test_draws_repeat_and_a_failure_prints_the_seed_and_the_replay_command(tmp_path):
    out, first = _run(tmp_path)
    _, second = _run(tmp_path)
    assert first == second  # random, torch and the test's own generator: all seeded
    seed = first[0]
    assert f"seed {seed}; replay: {ENV}={seed} python -m pytest" in out and "test_draws" in out
    _, chosen = _run(tmp_path, env_seed="12345")
    assert chosen[0] == "12345" and chosen[1:] != first[1:]
    _, fresh = _run(tmp_path, env_seed="random")
    assert fresh != first
