"""interpreter_compat on the installed Triton: each interpreter bug it fixes, shown by a small kernel
(CI runs this on the oldest and the newest supported Triton)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernelevolve.evaluation.interpreter_compat import SUPPORTED_TRITON, patch_triton_interpreter, triton_version


@triton.jit
def _scalar_and_vector_mask(x_ptr, y_ptr, n, n_rows, stride, BLOCK: tl.constexpr):
    # `row < n_rows` is a scalar comparison: broadcast into the mask it became int32 data, which
    # Triton 3.9's interpreter refuses in loads, stores and atomics ("mask has unsupported dtype").
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = (cols < n) & (row < n_rows)
    x = tl.load(x_ptr + row * stride + cols, mask=ok, other=0.0)
    tl.store(y_ptr + row * stride + cols, x * 2.0, mask=ok)
    tl.atomic_add(y_ptr + row * stride + cols, 1.0, mask=ok, sem="relaxed")


@triton.jit
def _runtime_loop_bound(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):  # a runtime bound: int(array) under numpy >= 2.3 on triton 3.6
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


@triton.jit
def _bf16_dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    idx = tl.arange(0, N)
    a = tl.load(a_ptr + idx[:, None] * N + idx[None, :])
    b = tl.load(b_ptr + idx[:, None] * N + idx[None, :])
    tl.store(c_ptr + idx[:, None] * N + idx[None, :], tl.dot(a, b))


@triton.jit
def _loop_variables(x_ptr, y_ptr, n_rows, P: tl.constexpr, BLOCK: tl.constexpr):
    # A range loop's variable is a tensor in compiled Triton (`.to()` works); a static_range loop's is
    # a constexpr int (it may pick from a tuple): the interpreter must give the same.
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for row in range(pid, n_rows, P):
        r = row.to(tl.int64)
        tl.store(y_ptr + r * BLOCK + cols, tl.load(x_ptr + r * BLOCK + cols) * 2.0)
    for j in tl.static_range(2):
        scale = (1.0, 3.0)[j]
        tl.store(y_ptr + n_rows * BLOCK + j * BLOCK + cols, tl.load(x_ptr + cols) * scale)


def test_fixes_match_the_installed_triton():
    applied = patch_triton_interpreter()
    assert patch_triton_interpreter() == applied  # idempotent
    version = triton_version()
    assert SUPPORTED_TRITON[0] <= version, f"triton {triton.__version__} is older than the supported range"
    assert ("index" in applied) == (version < (3, 7))
    assert "bf16_dot" in applied  # triton#11584, open through 3.9
    assert "loop_index" in applied  # a range loop's variable is an int in every checked version
    print(f"triton {triton.__version__}: interpreter fixes {applied}")


def test_scalar_comparison_in_a_mask():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = torch.full_like(x, -1.0)
    _scalar_and_vector_mask[(4,)](x, y, 3, 3, 4, BLOCK=4)  # program 3 is past the rows: fully masked
    expected = x * 2 + 1
    expected[:, 3] = -1.0  # column 3 is past n = 3: never written
    torch.testing.assert_close(y, expected)


def test_runtime_loop_bound():
    x = torch.arange(1000, dtype=torch.float32)
    out = torch.zeros(1)
    _runtime_loop_bound[(1,)](x, out, 1000, BLOCK=128)
    assert out.item() == pytest.approx(float(x.sum()))


def test_bf16_dot_multiplies_values_not_bit_patterns():
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=g).to(torch.bfloat16) for _ in range(2))
    c = torch.empty(16, 16, dtype=torch.float32)
    _bf16_dot[(1,)](a, b, c, N=16)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-4, rtol=1e-4)


def test_a_range_loops_variable_is_a_tensor_and_a_static_ones_an_int():
    patch_triton_interpreter()  # the harness applies it before any kernel runs
    x = torch.randn(7, 16)
    y = torch.zeros(9, 16)
    _loop_variables[(2,)](x, y, 7, P=2, BLOCK=16)
    torch.testing.assert_close(y[:7], 2 * x)
    torch.testing.assert_close(y[7:], torch.stack([x[0], 3 * x[0]]))


@triton.jit
def _twice_plus_one(x):
    return x * 2.0 + 1.0


@triton.jit
def _device_calls_in_a_loop(x_ptr, y_ptr, CALLS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(CALLS):
        acc += _twice_plus_one(tl.load(x_ptr + cols))
    tl.store(y_ptr + cols, acc)


def test_a_launch_patches_the_language_once_whatever_its_device_calls_and_undoes_it(monkeypatch):
    """The interpreter patched triton.language again at every call of a device function (here 3 programs x
    20 calls); it is patched once a launch (and module) now, the kernel computes the same, and the language is as it was
    after the launch."""
    from triton.runtime import interpreter

    applied = patch_triton_interpreter()
    assert "device_call_patch" in applied
    scopes = []

    class Counted(interpreter._LangPatchScope):
        def __init__(self) -> None:
            super().__init__()
            scopes.append(self)

    monkeypatch.setattr(interpreter, "_LangPatchScope", Counted)
    before = (tl.load, tl.core.tensor.__add__, tl.zeros)
    x = torch.randn(3 * 16)
    y = torch.empty_like(x)
    _device_calls_in_a_loop[(3,)](x, y, CALLS=20, BLOCK=16)
    torch.testing.assert_close(y, 20 * (2 * x + 1))
    # The launch's patch, and one more for tl.zeros (itself a device function whose module reaches
    # triton.language.core too, which the kernel's does not): not one per program and call.
    assert len(scopes) == 2, len(scopes)
    assert (tl.load, tl.core.tensor.__add__, tl.zeros) == before
