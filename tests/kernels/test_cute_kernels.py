"""The CuTe DSL reference kernels (knowledge_base/kernels/*_cute.py) on a machine without a GPU:
what can be checked here is that each is a CuTe DSL candidate its spec accepts, that its launch plan
covers every spec shape, that its CONFIG/TUNABLES are what the offline operator rewrites, and that
CuTe DSL traces and verifies the kernel (compiled for sm_90a, never launched). Whether they compute
the right values, and how fast, only a GPU run says (bench/kernels/reductions/peers_bench.py, kernelevolve eval --device cuda)."""

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


def _configs(module):
    """The kernel's CONFIG, then each TUNABLES value on its own."""
    yield dict(module.CONFIG)
    for key, values in module.TUNABLES.items():
        for value in values:
            yield {**module.CONFIG, key: value}


@pytest.mark.parametrize("op", OPS)
def test_launch_plan_covers_every_spec_shape(op):
    """Every vector of a row is read by exactly one thread of one block under every tunable value;
    under CONFIG long rows use a cluster, short ones several rows per block."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    module = _module(op)
    spec = load_spec(ROOT / "specs" / f"{op}.yaml")
    for shape in spec.shapes:
        n = shape.get("N", shape.get("V"))
        for config in _configs(module):
            plan = module.row_plan(n, 16, config)
            assert plan.vec * plan.bits // plan.vec == config["copy_bits"] and plan.vec * 16 == plan.bits
            assert plan.cluster_n * plan.row_threads * plan.vecs * plan.chunks * plan.vec == n, (shape, config, plan)
            assert plan.threads % 32 == 0 and plan.threads <= 1024 and plan.threads % plan.row_threads == 0
            assert plan.row_threads % 32 == 0 or plan.row_threads in (8, 16), plan
            assert plan.cluster_n <= config["max_cluster"] and (plan.cluster_n == 1 or plan.rows_per_block == 1)
            if op != "cross_entropy":
                most = max(config["vecs_per_thread"], config["cluster_vecs_per_thread"])
                most = most if plan.cluster_n < config["max_cluster"] else 32
                assert plan.chunks == 1 and plan.vecs <= most, (shape, config, plan)
            else:
                assert plan.vecs <= config["chunk_vecs"], (shape, config, plan)
        plan = module.row_plan(n, 16, module.CONFIG)
        assert (plan.cluster_n > 1) == (n > 16384) or n % 4096, (shape, plan)  # V = 32000 tiles over 5 blocks
        assert (plan.rows_per_block > 1) == (n <= 4096), (shape, plan)
    with pytest.raises(ValueError, match="not a whole number of 128-bit vectors"):
        module.row_plan(1001, 16, module.CONFIG)
    with pytest.raises(ValueError, match="125 vectors splits over no cluster"):
        module.row_plan(1000, 16, module.CONFIG)


@pytest.mark.parametrize("op", OPS)
def test_cute_kernel_traces_for_hopper(op, monkeypatch):
    """CuTe DSL builds and verifies the kernel's IR: several rows per block with a ragged last block
    (N = 256, 6 rows), one row over a cluster (N = 65536) with the barrier and the mbarrier exchange;
    RMSNorm and softmax also with the slice staged in shared memory (cp.async), softmax also online."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    import torch

    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack, make_fake_stream

    module = _module(op)
    for m, n, mbarrier, stage in ((6, 256, False, True), (2, 65536, False, False), (2, 65536, True, True)):
        x = torch.empty(m, n, dtype=torch.bfloat16)
        plan = module.row_plan(n, 16, module.CONFIG)
        consts = (*plan, m % plan.rows_per_block != 0)
        assert consts[-1] == (n == 256)
        if op == "rmsnorm":
            args = [
                from_dlpack(t, assumed_align=16) for t in (x, torch.empty(n, dtype=torch.bfloat16), torch.empty_like(x))
            ]
            compiled = cute.compile(
                module._rmsnorm_launch, *args, 1e-6, make_fake_stream(), *consts, mbarrier, 0, stage
            )
        elif op == "softmax":
            args = [from_dlpack(t, assumed_align=16) for t in (x, torch.empty_like(x))]
            compiled = cute.compile(
                module._softmax_launch, *args, make_fake_stream(), *consts, mbarrier, 0, stage, False
            )
            assert callable(compiled)
            # The online softmax: max and sum merged in one exchange (no slice staging with it).
            compiled = cute.compile(
                module._softmax_launch, *args, make_fake_stream(), *consts, mbarrier, 0, False, True
            )
        else:
            target, loss = torch.zeros(m, dtype=torch.int64), torch.empty(m)
            args = [from_dlpack(x, assumed_align=16), from_dlpack(target), from_dlpack(loss)]
            compiled = cute.compile(
                module._cross_entropy_launch, *args, make_fake_stream(), *consts, mbarrier, 0, True, -100
            )
        assert callable(compiled)


def test_min_blocks_per_sm_caps_registers(monkeypatch):
    """CONFIG["min_blocks_per_sm"] reaches the compiler (minctasm): RMSNorm at N = 65536 compiles for
    sm_90a with three resident 256-thread blocks asked for (the SM's shared memory, which the compiler
    asks the driver for, given here: there is no GPU)."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (the [cute] extra) is not installed")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    import torch

    import cutlass.base_dsl.runtime.cuda as cuda_runtime
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack, make_fake_stream

    monkeypatch.setattr(cuda_runtime, "get_device_attribute", lambda *args, **kwargs: 228 * 1024)
    module = _module("rmsnorm")
    x = torch.empty(2, 65536, dtype=torch.bfloat16)
    config = {**module.CONFIG, "min_blocks_per_sm": 3}
    plan = module.row_plan(65536, 16, config)
    consts = module.launch_consts(plan, 2, config)
    assert consts[-2:] == (True, 3)  # the mbarrier exchange (the default), 3 blocks per SM
    args = [
        from_dlpack(t, assumed_align=16) for t in (x, torch.empty(65536, dtype=torch.bfloat16), torch.empty_like(x))
    ]
    assert callable(cute.compile(module._rmsnorm_launch, *args, 1e-6, make_fake_stream(), *consts, False))
