"""Reference kernels run under the Triton interpreter on CPU: set it up before any kernel is defined."""

import contextlib
import importlib.util
import itertools
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelevolve.evaluation.interpreter_compat import patch_triton_interpreter  # noqa: E402
from kernelevolve.operators.tunables import read_declared, rewrite_config  # noqa: E402
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS  # noqa: E402
from tests.seeding import seed  # noqa: E402,F401  (autouse: every draw seeded, the seed printed on failure)

patch_triton_interpreter()
sys.path.insert(0, str(KNOWLEDGE_BASE / "kernels"))  # the kernels' shared _launch_heuristics, as the evaluator does
_counter = itertools.count()


@pytest.fixture(autouse=True, scope="session")
def _interpreter_on():
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    assert os.environ.get("TRITON_INTERPRET") == "1"
    # Triton decides at import whether its own @jit library (tl.cdiv, tl.sum's helpers...) is
    # interpreted: a test module that imports triton before setting TRITON_INTERPRET=1 breaks every
    # kernel here with "Cannot call @triton.jit'd outside of the scope of a kernel".
    assert isinstance(tl.cdiv, InterpretedFunction), (
        "triton was imported before TRITON_INTERPRET=1 was set (by a test module collected before "
        "tests/kernels): set os.environ['TRITON_INTERPRET'] = '1' before `import triton` there"
    )


class LaunchSpy:
    """Stands in for a @triton.jit kernel of a module and records each launch's tensor arguments."""

    def __init__(self, fn):
        self.fn, self.launches = fn, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append([a for a in args if isinstance(a, torch.Tensor)])
            return self.fn[grid](*args, **kwargs)

        return launch


def load_kernel(name: str, tmp_path: Path | None = None, **config):
    """A fresh module of the kernel file, its CONFIG line rewritten as the search would."""
    path = KNOWLEDGE_BASE / "kernels" / f"{name}.py"
    if config:
        source = path.read_text()
        path = tmp_path / f"{name}_variant.py"
        path.write_text(rewrite_config(source, dict(read_declared(source).config, **config)))
    module_name = f"_kernel_{name}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # triton.jit reads the kernel source through the module
    spec.loader.exec_module(module)
    return module


def load_reference(name: str, **constants):
    """The spec's reference module, with module constants overridden as a spec shape would."""
    spec = importlib.util.spec_from_file_location(f"_reference_{name}_{next(_counter)}", SPECS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for key, value in constants.items():
        setattr(module, key, value)
    return module


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty / empty_like / empty_strided return NaN-filled tensors while the kernel runs."""
    saved = {n: getattr(torch, n) for n in ("empty", "empty_like", "empty_strided")}

    def poisoning(fn):
        def allocate(*args, **kwargs):
            t = fn(*args, **kwargs)
            return t.fill_(float("nan")) if t.is_floating_point() else t

        return allocate

    for n, fn in saved.items():
        setattr(torch, n, poisoning(fn))
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch, n, fn)


@pytest.fixture(scope="session")
def sm90(tmp_path_factory):
    """The session's sm_90a compile interpreter (tests/kernels/sm90.py: Compiler), shared by the Gluon
    compile tests of test_*_hopper.py; they are marked xdist_group("sm90") so that under pytest-xdist
    one worker starts it, once."""
    from tests.kernels.sm90 import Compiler

    compiler = Compiler(tmp_path_factory.mktemp("sm90"))
    yield compiler
    compiler.close()
