"""The harness's checks as plain, importable Python: screen, tripwire, kernel monitor, input guard,
and the timing cross-check (the GPU loop itself runs only in bench/ on a GPU)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: it reads this once

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernelevolve.harness.runtime.input_guard import InputGuard  # noqa: E402
from kernelevolve.harness.runtime.kernel_monitor import EveryCall, KernelMonitor  # noqa: E402
from kernelevolve.harness.runtime.screen import screen_source  # noqa: E402
from kernelevolve.harness.runtime.timing import Timing, cross_check  # noqa: E402
from kernelevolve.harness.runtime.tripwire import Tripwire  # noqa: E402


@pytest.mark.parametrize(
    "code, words",
    [
        ("import ctypes\n", "imports ctypes"),
        ("import torch\ntorch.softmax = None\n", "assigns to torch.softmax"),
        ("import torch\ntorch.cuda.Event.elapsed_time = None\n", "assigns to torch.cuda.Event.elapsed_time"),
        ("import os\nos.kill(1, 9)\n", "calls os.kill"),
        ("x = eval('1')\n", "calls eval()"),
        ("import torch\nf = getattr(torch, 'soft' + 'max')\n", "getattr with a computed name"),
        ("import torch\nx = torch.__dict__\n", "reaches __dict__"),
        ("from . import harness\n", "imports"),
    ],
)
def test_screen_flags_tampering(code, words):
    problems = screen_source(code)
    assert problems and any(words in p for p in problems), problems


def test_screen_passes_a_plain_kernel_module():
    code = (
        "import math\nimport torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
        "import os\nDEBUG = os.environ.get('X')\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    )
    assert screen_source(code) == []


def test_tripwire_sees_replaced_and_shadowing_callables():
    wire = Tripwire()
    assert wire.changed() == []
    saved = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True
        assert "torch.allclose" in wire.changed()
    finally:
        torch.allclose = saved
    torch.Tensor.__sub__ = lambda a, b: a  # shadows the C method of the base class
    try:
        assert "torch.Tensor.__sub__" in wire.changed()
    finally:
        del torch.Tensor.__sub__
    assert wire.changed() == []


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


_STASH = {}


def _softmax_in_python():
    _STASH["y"].copy_(torch.softmax(_STASH["x"], dim=0))
    return 0


@triton.jit
def _calls_torch_kernel(x_ptr):
    _softmax_in_python()  # plain Python under the interpreter
    tl.load(x_ptr)


def test_torch_compute_inside_a_launch_is_the_candidates_in_hooks_and_interpreted_bodies():
    """Held-out candidates hid torch.softmax inside a launch: in a JIT pre-run hook (Triton runs it inside
    `run`) and, under the interpreter, in a plain function called from the kernel's body. Both are counted as
    the candidate's torch compute; the interpreter's own bookkeeping inside a launch is not."""
    x = torch.randn(16)
    with KernelMonitor() as m:
        y = torch.empty_like(x)
        _copy_kernel[(1,)](x, y, 16, BLOCK=16)
    assert m.compute_ops == {} and m.verdict() is None  # the interpreter's launch: untyped_storage, data_ptr...

    job = {}

    def hook(*args, **kwargs):
        job["y"].copy_(torch.softmax(job["x"], dim=0))

    _copy_kernel.add_pre_run_hook(hook)
    try:
        with KernelMonitor() as m:
            job["x"], job["y"] = x, torch.empty_like(x)
            _copy_kernel[(1,)](job["y"], job["y"], 16, BLOCK=16)
        assert m.launches == {"_copy_kernel": 1} and "softmax" in m.compute_ops, m.compute_ops
        assert "torch.softmax" in m.verdict()
        assert _copy_kernel.pre_run_hooks == [hook]  # the candidate's own list, as it left it
    finally:
        _copy_kernel.pre_run_hooks.remove(hook)

    with KernelMonitor() as m:
        _STASH["x"], _STASH["y"] = x, torch.empty_like(x)
        _calls_torch_kernel[(1,)](x)
    assert m.launches == {"_calls_torch_kernel": 1} and "softmax" in m.compute_ops, m.compute_ops
    assert torch.allclose(_STASH["y"], torch.softmax(x, dim=0))  # it did compute the result


def test_kernel_monitor_counts_launches_and_torch_compute():
    x = torch.randn(16)
    with KernelMonitor() as m:
        y = torch.empty_like(x)
        _copy_kernel[(1,)](x, y, 16, BLOCK=16)
    assert m.launches == {"_copy_kernel": 1} and m.compute_ops == {} and m.verdict() is None
    with KernelMonitor() as m:
        torch.softmax(x, dim=0)
    assert "launched no triton kernel" in m.verdict() and "torch.softmax" in m.verdict()
    with KernelMonitor({"exp"}) as m:
        y = torch.empty_like(x)
        _copy_kernel[(1,)](x.exp(), y, 16, BLOCK=16)
    assert m.verdict() is None  # the spec allowed exp
    with KernelMonitor() as m:
        y = torch.empty_like(x)
        _copy_kernel[(1,)](x.exp(), y, 16, BLOCK=16)
    assert "torch.exp x1" in m.verdict()
    with KernelMonitor() as m:  # questions about dtypes and shapes are glue, not compute
        dtype = torch.promote_types(torch.result_type(x, x), torch.float32)
        y = torch.empty(torch.broadcast_shapes(x.shape, (16,)), dtype=dtype)
        _copy_kernel[(1,)](x, y, 16, BLOCK=16)
    assert m.verdict() is None and m.compute_ops == {}


def test_every_timed_call_is_checked_and_a_candidate_asking_whether_it_is_watched_always_is():
    """The timing harness runs its whole loop under the monitor (EveryCall): a candidate that launches its
    kernel only while a TorchFunctionMode is active launches it on every call, and one that computes with
    torch on a later call is named with that call."""

    def copy(x):
        y = torch.empty_like(x)
        _copy_kernel[(1,)](x, y, 16, BLOCK=16)
        return y

    def detects_the_monitor(x):
        return copy(x) if torch.overrides._is_torch_function_mode_enabled() else torch.softmax(x, dim=0)

    x = torch.randn(16)
    timed = EveryCall(detects_the_monitor, KernelMonitor())
    with timed.monitor:
        outs = [timed(x) for _ in range(5)]
    assert timed.failed is None and timed.calls == 5 and timed.monitor.launches == {"_copy_kernel": 5}
    assert all(torch.equal(o, x) for o in outs)

    calls = iter(range(100))

    def torch_from_the_fourth_call(x):
        return copy(x) if next(calls) < 3 else torch.softmax(x, dim=0)

    timed = EveryCall(torch_from_the_fourth_call, KernelMonitor())
    with timed.monitor:
        for _ in range(6):
            timed(x)
    assert timed.failed is not None and timed.failed[0] == 3, timed.failed
    assert "launched no triton kernel" in timed.failed[1] and "torch.softmax" in timed.failed[1]


def test_kernel_monitor_counts_a_compiled_kernel_launched_directly():
    """A launcher that keeps Triton's compiled kernel and calls its `run` (skipping the JIT's argument
    binding, as int8_mqa_decode's cached launch does) launches a Triton kernel: it counts, by the kernel's
    name, once; through the JIT it still counts once (the JIT calls the same `run` inside)."""
    from triton.compiler.compiler import CompiledKernel

    calls = []
    kernel = CompiledKernel.__new__(CompiledKernel)  # what JITFunction returns, its launcher stubbed (no GPU)
    kernel.name = "_decode_split"
    kernel._run = lambda *args: calls.append(args)
    with KernelMonitor() as m:
        kernel.run(1, 1, 1, 0, None)
    assert calls == [(1, 1, 1, 0, None)] and m.launches == {"_decode_split": 1} and m.verdict() is None
    assert CompiledKernel.__dict__["run"].fget(kernel) is kernel._run  # restored on exit
    x = torch.randn(16)
    with KernelMonitor() as m:
        _copy_kernel[(1,)](x, torch.empty_like(x), 16, BLOCK=16)
    assert m.launches == {"_copy_kernel": 1}


def test_a_kernel_torch_compile_wrote_is_torch_compute_not_the_candidates(tmp_path, monkeypatch):
    """Inductor writes the Triton kernels of a torch.compile'd forward as modules in its cache (each
    evaluation's TORCHINDUCTOR_CACHE_DIR): launched, they are torch's work, named as compute."""
    import importlib.util

    cache = tmp_path / "inductor" / "ab"
    cache.mkdir(parents=True)
    src = (
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef triton_poi_fused_copy_0(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n"
    )
    (cache / "cab.py").write_text(src)
    spec = importlib.util.spec_from_file_location("cab", cache / "cab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    x = torch.randn(16)
    timed = EveryCall(
        lambda x: module.triton_poi_fused_copy_0[(1,)](x, torch.empty_like(x), 16, BLOCK=16), KernelMonitor()
    )
    with timed.monitor:
        timed(x)
    assert timed.failed is not None and "compile[triton_poi_fused_copy_0]" in timed.failed[1], timed.failed
    assert timed.monitor.launches == {}
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")  # the same file, not under inductor's cache: a kernel
    timed = EveryCall(
        lambda x: module.triton_poi_fused_copy_0[(1,)](x, torch.empty_like(x), 16, BLOCK=16), KernelMonitor()
    )
    with timed.monitor:
        timed(x)
    assert timed.failed is None and timed.monitor.launches == {"triton_poi_fused_copy_0": 1}


def test_torch_compiles_own_module_patch_is_not_tampering_but_a_lookalike_is():
    """torch.compile's first use wraps torch.nn.Module.__init__/__setstate__ (dynamo's generation tags):
    the tripwire lets exactly that through, and still names a candidate's own replacement. In a fresh
    process: the patch is for good."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from kernelevolve.harness.runtime.tripwire import Tripwire\n"
        "wire = Tripwire()\n"
        "from torch._dynamo import mutation_guard\n"
        "mutation_guard.install_generation_tagging_init()\n"
        "print('after dynamo:', wire.changed())\n"
        "init = torch.nn.Module.__init__\n"
        "def mine(self, *a, **k):\n"
        "    init(self, *a, **k)\n"
        "torch.nn.Module.__init__ = mine\n"
        "print('after mine:', wire.changed())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "after dynamo: []" in out.stdout, out.stdout
    assert "after mine: ['torch.nn.Module.__init__']" in out.stdout, out.stdout


def test_input_guard_sees_writes_and_aliasing():
    x = torch.randn(4, 4)
    guard = InputGuard([x, 3])
    assert guard.mutated() == [] and guard.aliased([torch.zeros(4, 4)]) == []
    assert guard.aliased([x[1:]]) == [(0, 0)]
    x[0, 0] += 1
    assert guard.mutated() == [0]


def test_timing_cross_check():
    honest = Timing(median_ms=0.1, calls=1000, wall_ms=130.0, stream_ms=125.0)
    assert cross_check(honest) is None
    lying_timer = Timing(median_ms=0.1, calls=1000, wall_ms=50.0, stream_ms=48.0)  # events exceed the wall clock
    assert "wall time" in cross_check(lying_timer)
    off_stream = Timing(median_ms=0.001, calls=1000, wall_ms=400.0, stream_ms=20.0)
    assert "outside the timed region" in cross_check(off_stream)


def test_the_knowledge_bases_helper_modules_are_importable_by_convention(tmp_path):
    from kernelevolve import paths

    bundled = "from _row_io import load_rows\nimport _launch_heuristics\n"
    assert screen_source(bundled) == []  # kernels/_*.py of the bundled knowledge base
    mine = "import _my_tiles\n"
    assert screen_source(mine)  # not a helper of the bundled knowledge base
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "_my_tiles.py").write_text("TILE = 64\n")
    paths.use_knowledge_base(tmp_path)  # a user's --kb with a helper of its own
    try:
        assert screen_source(mine) == []
        assert screen_source(bundled)  # that knowledge base has no _row_io
    finally:
        paths.use_knowledge_base(None)


def test_saving_a_tensor_is_not_tampering():
    """torch.save pickles a tensor, and Python caches __slotnames__ on torch.Tensor: not a replacement."""
    import io

    import torch

    tripwire = Tripwire()
    torch.save(torch.zeros(2), io.BytesIO())
    assert tripwire.changed() == []
