"""The block-diagonal attention forward and backward kernels under the Triton interpreter.

Each check runs ModelNew while torch.empty & co. hand out NaN-filled memory (an unwritten element
fails) and compares with the spec's reference module in float64 on the same rounded inputs. The
batches are jagged on purpose: an empty sequence, lengths of 1, 63, 64, 65 and 130 (partial last
blocks, exact multiples, blocks straddling the 128-row blocks of flex's mask), inputs read through
strided views of wider tensors, a head dim that is not a power of two, and both grid orders.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from kernelevolve.knowledge.frontmatter import kernel_docstring, split_front_matter
from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS
from kernelevolve.spec import load_spec

from .conftest import load_kernel, load_reference, poisoned_allocations

NAMES = [
    "block_diag_attention",
    "block_diag_attention_bwd",
    "block_diag_attention_rope",
    "block_diag_attention_rope_bwd",
]
LENGTHS = [65, 0, 1, 130, 64, 63]


def offsets_of(lengths: list[int]) -> torch.Tensor:
    out = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    out[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return out


def packed(tokens: int, heads: int, dim: int, dtype: torch.dtype, strided: bool) -> torch.Tensor:
    """[tokens, heads, dim]; with `strided`, the first `dim` columns of a wider NaN-padded tensor."""
    if not strided:
        return torch.randn(tokens, heads, dim).to(dtype)
    wide = torch.full((tokens, heads, dim + 8), float("nan"), dtype=dtype)
    wide[..., :dim] = torch.randn(tokens, heads, dim).to(dtype)
    return wide[..., :dim]


def loop_attention(q, k, v, offsets, block=64):
    """The definition, one block at a time (float64)."""
    out = torch.zeros_like(q)
    for b in range(len(offsets) - 1):
        for r0 in range(int(offsets[b]), int(offsets[b + 1]), block):
            r1 = min(r0 + block, int(offsets[b + 1]))
            qq, kk, vv = (x[r0:r1].transpose(0, 1) for x in (q, k, v))
            p = torch.softmax(qq @ kk.transpose(1, 2) / math.sqrt(q.shape[-1]), -1)
            out[r0:r1] = (p @ vv).transpose(0, 1)
    return out


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
    tokens = 1152 * 0.3 * 2000
    expected = (10 if name.endswith("_bwd") else 4) * tokens * 64 * 4 * 128
    assert spec.roofline(spec.cases("cuda")[0])[1] == pytest.approx(expected)


def test_reference_lengths_are_fixed_and_have_the_declared_sparsity():
    ref = load_reference("block_diag_attention", BATCH=1152, MAX_LEN=2000, SPARSITY=0.7, HEADS=1, HEAD_DIM=1)
    torch.manual_seed(1)
    *_, first = ref.get_inputs()
    torch.manual_seed(2)
    *_, second = ref.get_inputs()
    assert torch.equal(first, second), "the batch layout must not depend on the trial's seed"
    lengths = first.diff()
    assert len(lengths) == 1152 and lengths.min() >= 1 and lengths.max() <= 2000
    assert abs(lengths.double().mean().item() - 0.3 * 2000) < 1
    assert len(set(lengths.tolist())) > 500, "lengths are spread, not one value"


def test_reference_exact_path_is_the_definition():
    ref = load_reference("block_diag_attention", HEADS=2, HEAD_DIM=8)
    offsets = offsets_of(LENGTHS)
    q, k, v = (torch.randn(int(offsets[-1]), 2, 8, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(ref.Model()(q, k, v, offsets), loop_attention(q, k, v, offsets))


def test_reference_flex_mask_matches_the_definition():
    """The block mask the GPU baseline uses (sparse kv block lists + mask_mod), run by eager flex on CPU."""
    ref = load_reference("block_diag_attention")  # flex runs eagerly here: same mask, no compiler on CPU
    offsets = offsets_of([100, 1, 200, 64, 20])
    q, k, v = (torch.randn(int(offsets[-1]), 2, 16) for _ in range(3))
    with pytest.warns(UserWarning):  # flex warns that it runs uncompiled
        got = ref.flex_block_attention(q, k, v, offsets, 64)
    torch.testing.assert_close(
        got.double(), loop_attention(q.double(), k.double(), v.double(), offsets), atol=1e-5, rtol=1e-5
    )


CASES = [  # (heads, head_dim, dtype, strided, config)
    (2, 32, torch.bfloat16, False, {"HEADS_INNER": False, "HEADS_PER_PROGRAM": 2}),
    # D padded to 64; 2 heads a program does not divide 3: one a program
    (3, 48, torch.float16, True, {"HEADS_INNER": True, "num_warps": 4, "HEADS_PER_PROGRAM": 2}),
]


@pytest.mark.parametrize("case", CASES, ids=["bf16-D32-two-heads-a-program", "fp16-D48-strided-heads-inner-H3"])
def test_forward_kernel(case, tmp_path):
    heads, dim, dtype, strided, config = case
    kernel = load_kernel("block_diag_attention", tmp_path, **config)
    offsets = offsets_of(LENGTHS)
    q, k, v = (packed(int(offsets[-1]), heads, dim, dtype, strided) for _ in range(3))
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew()(q, k, v, offsets)
    expected = loop_attention(q.double(), k.double(), v.double(), offsets)
    assert out.dtype == dtype and out.shape == q.shape and torch.isfinite(out).all()
    tol = load_spec(SPECS / "block_diag_attention.yaml").tolerance("bfloat16")
    torch.testing.assert_close(out.double(), expected, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("case", CASES, ids=["bf16-D32-two-heads-a-program", "fp16-D48-strided-heads-inner-H3"])
def test_backward_kernel(case, tmp_path):
    heads, dim, dtype, strided, config = case
    kernel = load_kernel("block_diag_attention_bwd", tmp_path, **config)
    offsets = offsets_of(LENGTHS)
    q, k, v, do = (packed(int(offsets[-1]), heads, dim, dtype, strided) for _ in range(4))
    with torch.no_grad(), poisoned_allocations():
        grads = kernel.ModelNew()(q, k, v, do, offsets)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(loop_attention(*leaves, offsets), leaves, do.double())
    tol = load_spec(SPECS / "block_diag_attention_bwd.yaml").tolerance("bfloat16")
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        assert got.dtype == dtype and got.shape == q.shape and torch.isfinite(got).all(), name
        torch.testing.assert_close(got.double(), want, atol=tol.atol, rtol=tol.rtol, msg=lambda m: f"{name}: {m}")


def test_reference_backward_is_autograd_of_the_definition():
    ref = load_reference("block_diag_attention_bwd", HEADS=1, HEAD_DIM=8)
    offsets = offsets_of([70, 3, 0, 130])
    q, k, v, do = (torch.randn(203, 1, 8, dtype=torch.float64) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(loop_attention(*leaves, offsets), leaves, do)
    with torch.no_grad():  # the harness calls it so: the reference turns gradients back on itself
        got = ref.Model()(q, k, v, do, offsets)
        in_chunks = ref.exact_block_gradients(q, k, v, do, offsets, 64, chunk=2)  # 6 blocks, 3 chunks
    for a, b, c in zip(got, in_chunks, expected):
        torch.testing.assert_close(a, c)
        torch.testing.assert_close(b, c)


def test_bad_offsets_are_one_line_errors(tmp_path):
    kernel = load_kernel("block_diag_attention")
    q = torch.zeros(4, 1, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="offsets must be a 1-D integer tensor"):
        kernel.block_diag_attention(q, q, q, torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="share one"):
        kernel.block_diag_attention(q, q, q[:2], offsets_of([4]))


def rope_definition(x: torch.Tensor, offsets: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE as complex multiplication: (x1 + i x2) * exp(i * position * base^(-2j/D)), float64."""
    half = x.shape[-1] // 2
    out = torch.empty_like(x)
    for b in range(len(offsets) - 1):
        for t in range(int(offsets[b]), int(offsets[b + 1])):
            angle = (t - int(offsets[b])) * base ** (-2.0 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
            z = torch.complex(x[t, :, :half], x[t, :, half:]) * torch.polar(torch.ones_like(angle), angle)
            out[t, :, :half], out[t, :, half:] = z.real, z.imag
    return out


def test_rope_reference_rotates_by_the_position_in_the_sequence():
    ref = load_reference("block_diag_attention_rope")
    offsets = offsets_of([3, 0, 5])
    x = torch.randn(8, 2, 8, dtype=torch.float64)
    torch.testing.assert_close(ref.rotary(x, offsets, 10000.0), rope_definition(x, offsets))


def test_rope_kernel(tmp_path):
    kernel = load_kernel("block_diag_attention_rope", tmp_path, HEADS_PER_PROGRAM=2)
    offsets = offsets_of([130, 0, 1, 65])  # positions past 64 and 128 within a sequence
    q, k, v = (packed(int(offsets[-1]), 2, 32, torch.bfloat16, strided=True) for _ in range(3))
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew()(q, k, v, offsets)
    q64, k64 = (rope_definition(t.double(), offsets) for t in (q, k))
    expected = loop_attention(q64, k64, v.double(), offsets)
    tol = load_spec(SPECS / "block_diag_attention_rope.yaml").tolerance("bfloat16")
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, atol=tol.atol, rtol=tol.rtol)
    with pytest.raises(ValueError, match="must be even"):
        kernel.block_diag_attention_rope(q[..., :31], k[..., :31], v[..., :31], offsets)


def test_rope_backward_reference_and_kernel(tmp_path):
    """Gradients with respect to the unrotated q and k: autograd through rotation + definition."""
    offsets = offsets_of([130, 0, 1, 65])
    q, k, v, do = (packed(int(offsets[-1]), 2, 32, torch.bfloat16, strided=True) for _ in range(4))
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    rotated = [rope_definition(t, offsets) for t in leaves[:2]]
    expected = torch.autograd.grad(loop_attention(*rotated, leaves[2], offsets), leaves, do.double())
    ref = load_reference("block_diag_attention_rope_bwd")
    with torch.no_grad():
        for a, b in zip(ref.Model()(*(t.double() for t in (q, k, v, do)), offsets), expected):
            torch.testing.assert_close(a, b)
    kernel = load_kernel("block_diag_attention_rope_bwd", tmp_path, HEADS_PER_PROGRAM=2)
    with torch.no_grad(), poisoned_allocations():
        grads = kernel.ModelNew()(q, k, v, do, offsets)
    tol = load_spec(SPECS / "block_diag_attention_rope_bwd.yaml").tolerance("bfloat16")
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        assert got.dtype == torch.bfloat16 and torch.isfinite(got).all(), name
        torch.testing.assert_close(got.double(), want, atol=tol.atol, rtol=tol.rtol, msg=lambda m: f"{name}: {m}")
