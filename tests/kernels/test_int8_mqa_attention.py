"""The int8 multi-query attention kernels (decode with head packing and split-KV, prefill) under the
Triton interpreter, against the spec references in float64 on the same codes and scales.

Outputs are allocated NaN-filled while a kernel runs (an unwritten element fails). The decode cases
cover one split and several (the interpreter's SM count is 4, so the split count follows the batch),
a KV length that is not a multiple of the tile, Q_LEN > 1 (rows packed as head x token) and inputs
read through transposed views; the prefill cases causal and not, with ragged sequence lengths.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelevolve.knowledge.frontmatter import kernel_docstring, split_front_matter
from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS
from kernelevolve.spec import load_spec

from .conftest import load_kernel, load_reference, poisoned_allocations

NAMES = ["int8_mqa_decode", "int8_mqa_prefill"]


def inputs(name: str, **constants) -> list[torch.Tensor]:
    ref = load_reference(name, **constants)
    return [x.to(torch.bfloat16) if x.is_floating_point() else x for x in ref.get_inputs()], ref


def expected_of(ref, xs: list, *init) -> torch.Tensor:
    with torch.no_grad():
        return ref.Model(*init)(*[x.double() if x.is_floating_point() else x for x in xs])


def assert_matches(name: str, out: torch.Tensor, want: torch.Tensor) -> None:
    tol = load_spec(SPECS / f"{name}.yaml").tolerance("bfloat16")
    assert out.dtype == torch.bfloat16 and out.shape == want.shape and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), want, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("name", NAMES)
def test_kernel_file_follows_the_convention(name):
    source = (KNOWLEDGE_BASE / "kernels" / f"{name}.py").read_text()
    header, body = split_front_matter(kernel_docstring(source, Path(name)), Path(name))
    assert header["kind"] == "kernels" and header["spec"] == name and body.strip()
    declared = read_declared(source)
    assert set(declared.config) == set(declared.tunables)
    for key, value in declared.config.items():
        assert value in declared.tunables[key], f"CONFIG[{key!r}] = {value!r} is not among its TUNABLES"
    spec = load_spec(SPECS / f"{name}.yaml")
    assert spec.kernel_name == name and spec.dtypes == ["bfloat16"]


def test_decode_spec_counts_the_kv_cache_bytes():
    spec = load_spec(SPECS / "int8_mqa_decode.yaml")
    nbytes, flops = spec.roofline(spec.cases("cuda")[0])  # BATCH=256, KV_LEN=1024, Q_LEN=1
    assert nbytes == 2 * 256 * 1024 * 128 + 2 * 256 * 1024 * 2 + 2 * 256 * 16 * 128 * 2
    assert flops == 4 * 256 * 16 * 1024 * 128


def test_reference_dequantises_per_token():
    (q, kc, ks, vc, vs), ref = inputs("int8_mqa_decode", BATCH=2, KV_LEN=5, Q_LEN=2, Q_HEADS=3, HEAD_DIM=8)
    assert kc.dtype == torch.int8 and kc.abs().max() == 127 and ks.shape == (2, 5)
    k = kc.double() * ks.double()[..., None]
    v = vc.double() * vs.double()[..., None]
    for h in range(3):
        scores = q[:, h].double() @ k.transpose(1, 2) / 8**0.5
        torch.testing.assert_close(expected_of(ref, [q, kc, ks, vc, vs])[:, h], torch.softmax(scores, -1) @ v)


DECODE = [  # (constants, PROGRAMS_PER_SM, BLOCK_N, COMBINE, more): sm_fill splits = min(tiles, ceil(4 * PPS / BATCH))
    (dict(BATCH=4, KV_LEN=37, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 1, 64, "kernel", {}),  # one split: the direct store
    (dict(BATCH=2, KV_LEN=150, Q_LEN=3, Q_HEADS=2, HEAD_DIM=64), 4, 64, "kernel", {}),  # 3 splits, ragged last one
    (dict(BATCH=2, KV_LEN=150, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 4, 64, "last_program", {}),  # merged in-kernel
    # each step loading its own scales (no prefetch), 3 splits
    (dict(BATCH=2, KV_LEN=150, Q_LEN=2, Q_HEADS=2, HEAD_DIM=32), 4, 64, "kernel", {"PREFETCH_SCALES": False}),
    # balanced: 1 batch element on 4 SMs, 5 tiles of 16 -> 3 splits of 2, 2, 1 tiles
    (dict(BATCH=1, KV_LEN=70, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 1, 16, "last_program", {"SPLIT_RULE": "balanced"}),
    # the bf16 path: inline PTX cannot run under the interpreter, so v_asm takes the cast there
    (dict(BATCH=2, KV_LEN=40, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 1, 16, "kernel", {"CONVERT": "v_asm"}),
    # fp16: every tile full (EVEN: no masks), 2 splits of 2 tiles merged in-kernel
    (dict(BATCH=2, KV_LEN=128, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 4, 32, "last_program", {"CONVERT": "f16"}),
    # fp16 with 64 rows (16 heads x 4 tokens: the row sum reduced every step), ragged tail
    (dict(BATCH=2, KV_LEN=90, Q_LEN=4, Q_HEADS=16, HEAD_DIM=32), 2, 32, "last_program", {"CONVERT": "f16"}),
    # each warp on its own keys (4 warps x 16 keys a tile): the last tile's 6 keys leave 3 warps without any
    (dict(BATCH=2, KV_LEN=70, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 1, 64, "last_program", {"WARP_SPLIT": True}),
    # V prefetched into registers one step ahead: 2 splits of 2 even tiles (the last step reloads its
    # own), a ragged tail
    (dict(BATCH=2, KV_LEN=128, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 1, 32, "last_program", {"V_IN_REGS": True}),
    (
        dict(BATCH=2, KV_LEN=70, Q_LEN=3, Q_HEADS=4, HEAD_DIM=32),
        2,
        64,
        "last_program",
        {"V_IN_REGS": True, "WARP_SPLIT": True},
    ),
    # the JIT launch every call
    (dict(BATCH=2, KV_LEN=70, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32), 2, 32, "last_program", {"LAUNCH": "jit"}),
]


@pytest.mark.parametrize(
    "case",
    DECODE,
    ids=[
        "one-split",
        "three-splits-qlen3",
        "three-splits-merged-in-kernel",
        "scales-not-prefetched",
        "balanced",
        "v-asm-falls-back-to-cast",
        "f16-even-tiles",
        "f16-64-rows",
        "warp-split-ragged",
        "v-in-regs-even",
        "v-in-regs-warp-split-ragged",
        "jit-launch",
    ],
)
def test_decode_kernel(case, tmp_path):
    constants, per_sm, block_n, combine, more = case
    config = dict(PROGRAMS_PER_SM=per_sm, BLOCK_N=block_n, COMBINE=combine, **more)
    kernel = load_kernel("int8_mqa_decode", tmp_path, **config)
    model = kernel.ModelNew()
    for _ in range(2):  # the arrival counters must be back at zero for the next call
        xs, ref = inputs("int8_mqa_decode", **constants)
        with torch.no_grad(), poisoned_allocations():
            out = model(*xs)
        assert_matches("int8_mqa_decode", out, expected_of(ref, xs))


def test_decode_auto_conversion_follows_the_row_count(tmp_path):
    """CONVERT auto: fp16 MMAs below 64 packed rows, the bf16 cast from 64 (as measured in
    bench/results/int8_mqa_decode/h200/2026-11-23_split_kv_tl_kernel/README.md)."""
    kernel = load_kernel("int8_mqa_decode", tmp_path, CONVERT="auto", BLOCK_N=32)
    for q_len, heads, want in ((1, 4, "f16"), (4, 16, "cast")):
        xs, ref = inputs("int8_mqa_decode", BATCH=1, KV_LEN=40, Q_LEN=q_len, Q_HEADS=heads, HEAD_DIM=32)
        kernel._PLANS.clear()
        with torch.no_grad(), poisoned_allocations():
            out = kernel.ModelNew()(*xs)
        assert_matches("int8_mqa_decode", out, expected_of(ref, xs))
        assert next(iter(kernel._PLANS.values())).consts["CONVERT"] == want


def test_decode_direct_launch_only_without_a_launch_hook():
    """Triton 3.6 keeps an empty HookChain as the launch hook: that is no hook (the cached direct
    launch may run); a profiler's hook in the chain sends launches through the JIT."""
    import triton

    load_kernel("int8_mqa_decode")  # puts the kernels folder on the path
    import _cached_launch

    assert _cached_launch.knobs_hook() is None
    chain = triton.knobs.runtime.launch_enter_hook
    if hasattr(chain, "add"):
        hook = lambda *args: None  # noqa: E731
        chain.add(hook)
        try:
            assert _cached_launch.knobs_hook() is not None
            # and then a direct launch declines (nothing launched: the JIT runs the kernel and the hook)
            assert _cached_launch.launch(None, (1,), (), ()) is False
        finally:
            chain.remove(hook)


def test_decode_f16_survives_extreme_magnitudes(tmp_path):
    """fp16 covers neither bf16's range nor arbitrary scales: q rows far above 65504 and V scales far
    below fp16's normal range must come out as right as with moderate values (q / max|q| per row,
    P * v_scale / the tile's largest scale)."""
    kernel = load_kernel("int8_mqa_decode", tmp_path, CONVERT="f16", BLOCK_N=32, PROGRAMS_PER_SM=2)
    (q, kc, ks, vc, vs), ref = inputs("int8_mqa_decode", BATCH=2, KV_LEN=64, Q_LEN=1, Q_HEADS=4, HEAD_DIM=32)
    q = q * torch.tensor([1e5, 1e-6, 1.0, 3e4], dtype=torch.bfloat16)[None, :, None, None]  # per head
    vs = vs * 1e-6
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew()(q, kc, ks, vc, vs)
    want = expected_of(ref, [q, kc, ks, vc, vs])
    assert torch.isfinite(out).all()
    scale = want.abs().amax()
    torch.testing.assert_close(out.double() / scale, want / scale, atol=0.02, rtol=0.02)


def prmt(a: int, b: int, selector: int) -> int:
    """PTX prmt.b32 (default mode): byte i of the result is byte (selector >> 4i) & 7 of {b, a}."""
    pool = (b << 32) | a
    return sum(((pool >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))


def test_decode_f16_conversion_ptx_is_exact():
    """The inline PTX of the f16 path (which the interpreter does not run), emulated from the kernel
    source's own constants over every int8 code in every byte position: exact, element 0 in the low half."""
    import re

    import numpy as np

    source = (KNOWLEDGE_BASE / "kernels" / "int8_mqa_decode.py").read_text()
    asm = source[source.index("_I8_TO_F16_PTX = ") :].split('"""', 2)[1]
    (xor,) = re.findall(r"xor\.b32 t, \$2, (0x[0-9a-fA-F]+);", asm)
    (lo_b, lo_s), (hi_b, hi_s) = re.findall(r"prmt\.b32 \w+, t, (0x[0-9a-fA-F]+), (0x[0-9a-fA-F]+);", asm)
    (sub,) = re.findall(r"mov\.b32 c, (0x[0-9a-fA-F]+);", asm)
    half = lambda bits: np.array([bits], dtype=np.uint16).view(np.float16)[0]  # noqa: E731
    for code in range(-128, 128):
        for pos in range(4):
            packed = [0, 1, -1, 7]
            packed[pos] = code
            reg = sum((c & 0xFF) << (8 * i) for i, c in enumerate(packed))
            t = reg ^ int(xor, 16)
            regs = [prmt(t, int(lo_b, 16), int(lo_s, 16)), prmt(t, int(hi_b, 16), int(hi_s, 16))]
            c = int(sub, 16)
            got = []
            for r in regs:
                for h in (0, 16):
                    got.append(float(half((r >> h) & 0xFFFF)) - float(half((c >> h) & 0xFFFF)))
            assert got == packed, (packed, got)


def test_decode_balanced_split_counts():
    """At the spec's shapes on 132 SMs the balanced rule splits only where the batch leaves SMs idle."""
    kernel = load_kernel("int8_mqa_decode")
    rule = dict(kernel.CONFIG, SPLIT_RULE="balanced")
    # (BATCH, tiles of 128 keys) -> splits: busiest SM streams 16 tiles in each case
    assert kernel.split_count(256, 8, 132, rule) == 1  # 2 programs on most SMs
    assert kernel.split_count(128, 16, 132, rule) == 1  # one program per SM, 4 SMs idle
    assert kernel.split_count(64, 32, 132, rule) == 2  # 128 programs of 16 tiles, not 192 of 11
    assert kernel.split_count(1, 5, 4, rule) == 3
    fill = dict(kernel.CONFIG, SPLIT_RULE="sm_fill", PROGRAMS_PER_SM=1)
    assert kernel.split_count(64, 32, 132, fill) == 3


def test_decode_kernel_reads_strided_views(tmp_path):
    """q as a transposed view ([B, Lq, H, D] storage) and scales as columns of a wider tensor."""
    kernel = load_kernel("int8_mqa_decode", tmp_path, PROGRAMS_PER_SM=2, BLOCK_N=64)
    (q, kc, ks, vc, vs), ref = inputs("int8_mqa_decode", BATCH=2, KV_LEN=40, Q_LEN=2, Q_HEADS=2, HEAD_DIM=32)
    q_view = q.transpose(1, 2).contiguous().transpose(1, 2)
    ks_view = torch.stack([ks, torch.full_like(ks, float("nan"))], -1)[..., 0]
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew()(q_view, kc, ks_view, vc, vs)
    assert_matches("int8_mqa_decode", out, expected_of(ref, [q, kc, ks, vc, vs]))


PREFILL = [  # (constants, causal, config)
    # the diagonal spans two key tiles
    (
        dict(BATCH=2, SEQ_LEN=45, Q_HEADS=2, HEAD_DIM=32),
        True,
        {"DEQUANT": "in_loop", "BLOCK_M": 32, "BLOCK_N": 16, "HEADS_PER_TILE": 1},
    ),
    # ragged last key tile
    (
        dict(BATCH=1, SEQ_LEN=50, Q_HEADS=3, HEAD_DIM=64),
        False,
        {"DEQUANT": "in_loop", "BLOCK_M": 64, "BLOCK_N": 32, "HEADS_PER_TILE": 1},
    ),
    # two heads x 16 positions a tile, causal: the mask follows each row's own position
    (
        dict(BATCH=1, SEQ_LEN=40, Q_HEADS=4, HEAD_DIM=32),
        True,
        {"DEQUANT": "in_loop", "BLOCK_M": 32, "BLOCK_N": 16, "HEADS_PER_TILE": 2},
    ),
    # K/V dequantised by a prepass, then bf16 attention: ragged tiles, TMA descriptors and pointers
    (dict(BATCH=2, SEQ_LEN=45, Q_HEADS=2, HEAD_DIM=32), True, {"DEQUANT": "prepass", "BLOCK_M": 32, "BLOCK_N": 16}),
    (
        dict(BATCH=2, SEQ_LEN=50, Q_HEADS=3, HEAD_DIM=64),
        False,
        {"DEQUANT": "prepass", "BLOCK_M": 32, "BLOCK_N": 32, "USE_TMA": False, "LAZY_RESCALE": True},
    ),
    (
        dict(BATCH=1, SEQ_LEN=64, Q_HEADS=2, HEAD_DIM=32),
        True,
        {"DEQUANT": "prepass", "BLOCK_M": 32, "BLOCK_N": 16, "LAZY_RESCALE": True},
    ),
]


@pytest.mark.parametrize(
    "case",
    PREFILL,
    ids=[
        "causal",
        "full",
        "causal-two-heads-a-tile",
        "prepass-causal",
        "prepass-full-pointers-lazy",
        "prepass-even-lazy",
    ],
)
def test_prefill_kernel(case, tmp_path):
    constants, causal, config = case
    kernel = load_kernel("int8_mqa_prefill", tmp_path, **config)
    xs, ref = inputs("int8_mqa_prefill", CAUSAL=int(causal), **constants)
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew(causal)(*xs)
    assert_matches("int8_mqa_prefill", out, expected_of(ref, xs, causal))


def test_bad_inputs_are_one_line_errors():
    kernel = load_kernel("int8_mqa_decode")
    q = torch.zeros(2, 4, 1, 16, dtype=torch.bfloat16)
    codes = torch.zeros(2, 8, 16, dtype=torch.int8)
    scale = torch.ones(2, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="k_codes must be int8"):
        kernel.int8_mqa_decode(q, codes.float(), scale, codes, scale)
    with pytest.raises(ValueError, match="v_scale must be"):
        kernel.int8_mqa_decode(q, codes, scale, codes, scale[:, :4])
