"""The CuTe DSL reference kernels (knowledge_base/kernels/*_cute.py) on a machine without a GPU:
what can be checked here is that each is a CuTe DSL candidate its spec accepts, that its launch plan
covers every spec shape, that its CONFIG/TUNABLES are what the offline operator rewrites, and that
CuTe DSL traces and verifies the kernel (compiled for sm_90a, never launched). Whether they compute
the right values, and how fast, only a GPU run says (bench/peers_bench.py, kernelevolve eval --device cuda)."""

import importlib.util
from pathlib import Path

import pytest

from kernelevolve.languages import detect
from kernelevolve.operators.tunables import read_declared
from kernelevolve.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "knowledge_base" / "kernels"
OPS = ("rmsnorm", "softmax", "cross_entropy")


def _module(op: str):
    spec = importlib.util.spec_from_file_location(f"cute_ref_{op}", KERNELS / f"{op}_cute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("op", OPS)
def test_cute_kernel_is_a_cute_candidate_of_its_spec(op):
    source = (KERNELS / f"{op}_cute.py").read_text()
    assert detect(source).label == "cute"
    assert "cute" in load_spec(ROOT / "specs" / f"{op}.yaml").languages
    declared = read_declared(source)
    assert declared.config and set(declared.tunables) <= set(declared.config)
    for key, values in declared.tunables.items():
        assert declared.config[key] in values, key  # the default is one of the searched values


@pytest.mark.parametrize("op", OPS)
def test_launch_plan_covers_every_spec_shape(op):
    """Every vector of a row is read by exactly one thread, long rows use a cluster, short ones do not."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    module = _module(op)
    spec = load_spec(ROOT / "specs" / f"{op}.yaml")
    for shape in spec.shapes:
        n = shape.get("N", shape.get("V"))
        plan = module.row_plan(n, 8, module.CONFIG)
        cluster, threads, rest = plan[0], plan[1], plan[2:]
        per_thread = 1
        for x in rest:
            per_thread *= x
        assert cluster * threads * per_thread * 8 == n, (shape, plan)
        assert threads % 32 == 0 and threads <= 1024 and cluster <= 8
        assert (cluster > 1) == (n >= 65536), (shape, plan)
    with pytest.raises(ValueError, match="not a multiple of 256"):
        module.row_plan(1000, 8, module.CONFIG)


@pytest.mark.parametrize("op", OPS)
def test_cute_kernel_traces_for_hopper(op, monkeypatch):
    """CuTe DSL builds and verifies the kernel's IR, with a cluster (N = 65536) and without (N = 256)."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    import torch

    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack, make_fake_stream

    module = _module(op)
    for n in (256, 65536):
        x = torch.empty(2, n, dtype=torch.bfloat16)
        plan = module.row_plan(n, 8, module.CONFIG)
        if op == "rmsnorm":
            args = [
                from_dlpack(t, assumed_align=16) for t in (x, torch.empty(n, dtype=torch.bfloat16), torch.empty_like(x))
            ]
            cluster, threads, iters = plan
            compiled = cute.compile(module._rmsnorm_launch, *args, 1e-6, make_fake_stream(), threads, iters, cluster, 8)
        elif op == "softmax":
            args = [from_dlpack(t, assumed_align=16) for t in (x, torch.empty_like(x))]
            cluster, threads, iters = plan
            compiled = cute.compile(module._softmax_launch, *args, make_fake_stream(), threads, iters, cluster, 8)
        else:
            target, loss = torch.zeros(2, dtype=torch.int64), torch.empty(2)
            args = [from_dlpack(x, assumed_align=16), from_dlpack(target), from_dlpack(loss)]
            compiled = cute.compile(module._cross_entropy_launch, *args, make_fake_stream(), *plan, 8, -100)
        assert callable(compiled)
