"""The host side of the CuTe DSL row kernels (knowledge_base/kernels/_cute_rows.py) on a machine
without a GPU: a launcher compiles its kernel for sm_90a (real cute.compile) once per shape, dtype
and plan and calls the compiled function with the arguments its launch takes. The compiled
function's call is recorded instead of run and the caller's CUDA stream is a stand-in (there is no
GPU here): what it computes only a GPU run says."""

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from kernelevolve.paths import KNOWLEDGE_BASE


class RecordingCache(dict):
    """A launcher's _COMPILED whose compiled launchers record their arguments instead of launching
    (a compiled launcher takes the aligned tensors and the others: run_compiled's two lists)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __setitem__(self, key, compiled):
        assert callable(compiled)
        super().__setitem__(key, lambda aligned, others: self.calls.append((key, [*aligned, *others])))


@pytest.fixture
def cute_module(monkeypatch):
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: SimpleNamespace(cuda_stream=0))

    def load(op: str):
        spec = importlib.util.spec_from_file_location(f"cute_rows_{op}", KNOWLEDGE_BASE / "kernels" / f"{op}_cute.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module._COMPILED = RecordingCache()
        return module

    return load


def test_rmsnorm_launcher_compiles_once_per_shape(cute_module):
    module = cute_module("rmsnorm")
    model = module.ModelNew(256)
    for shape in ((2, 3, 256), (6, 256), (4, 256)):
        y = model(torch.randn(*shape, dtype=torch.bfloat16))
        assert y.shape == shape and y.dtype == torch.bfloat16
    cache = module._COMPILED
    assert len(cache) == 2  # (2, 3, 256) and (6, 256) are the same [6, 256] rows
    assert [len(args) for _, args in cache.calls] == [4, 4, 4]  # x, weight, y, eps (the stream is added inside)
    assert [args[3] for _, args in cache.calls] == [model.eps] * 3
    assert [key for key, _ in cache.calls][0] == [key for key, _ in cache.calls][1] != cache.calls[2][0]


def test_cross_entropy_launcher_compiles_per_target_dtype(cute_module):
    module = cute_module("cross_entropy")
    logits = torch.randn(3, 256, dtype=torch.bfloat16)
    for target, ignore_index in (
        (torch.tensor([1, -100, 5]), -100),
        (torch.tensor([1, 2, 5], dtype=torch.int32), -100),
    ):
        loss = module.ModelNew(ignore_index)(logits, target)
        assert loss.shape == (3,) and loss.dtype == torch.float32
    assert len(module._COMPILED) == 2 and [len(args) for _, args in module._COMPILED.calls] == [3, 3]  # x, target, loss
