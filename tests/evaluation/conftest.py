from pathlib import Path

import pytest

from kernelevolve.spec import load_spec

HERE = Path(__file__).parent
GOOD = (HERE / "candidates" / "good.py").read_text()
FORWARD = "    def forward(self, x):\n"


def _edit(old: str, new: str, count: int = 1) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, count)


# Real candidates, one per failure class, each a small edit of the correct one (candidates/good.py).
VARIANTS = {
    "wrong": _edit("(x * w + b)", "(x * w)"),  # ignores the bias
    "partial": _edit("mask = offs < n_cols\n", "mask = offs < n_cols // 2\n"),  # writes half the row
    "wrong_dtype": _edit("y = torch.empty_like(x)", "y = torch.empty_like(x, dtype=torch.float64)"),
    "hang": _edit(FORWARD, FORWARD + "        while True:\n            pass\n"),
    "raises": _edit(FORWARD, FORWARD + "        raise RuntimeError('candidate gave up')\n"),
    "segfault": _edit(FORWARD, FORWARD + "        import os, signal\n        os.kill(os.getpid(), signal.SIGSEGV)\n"),
    "syntax_error": _edit("def forward(self, x):", "def forward(self, x)"),
    "no_modelnew": _edit("class ModelNew", "class ModelOld"),
    "bad_kernel": _edit("        tl.store(", "        tl.no_such_op(x)\n        tl.store("),
}


@pytest.fixture(scope="session")
def scale_shift_spec():
    return load_spec(HERE / "scale_shift.yaml")


def candidate(name: str) -> str:
    if name in VARIANTS:
        return VARIANTS[name]
    return (HERE / "candidates" / f"{name}.py").read_text()


def with_forward_prologue(code: str) -> str:
    """The correct candidate with `code` (indented 8 spaces) run first in forward."""
    return _edit(FORWARD, FORWARD + code)
