"""conv1d and optimized_fm read their operands in place through their strides: views that are not
contiguous (a slice of a wider NaN-padded tensor, a transpose, every other element) give the
reference's result, and the kernel is launched on the caller's own memory, not on a copy."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernelevolve.paths import SPECS
from kernelevolve.spec import load_spec

from .conftest import LaunchSpy, load_kernel, poisoned_allocations


def inside_nan(values: torch.Tensor, dim: int, pad: int, step: int = 1, offset: int = 0) -> torch.Tensor:
    """`values` as a view into a NaN-filled tensor that is wider along `dim` (elements `step` apart,
    starting at `offset`): reading anything outside the view gives NaN."""
    shape = list(values.shape)
    shape[dim] = offset + values.shape[dim] * step + pad
    wide = torch.full(shape, float("nan"), dtype=values.dtype)
    index = [slice(None)] * values.dim()
    index[dim] = slice(offset, offset + values.shape[dim] * step, step)
    view = wide[tuple(index)]
    view.copy_(values)
    assert not view.is_contiguous()
    return view


def transposed(values: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """The same values stored with dimensions a and b swapped in memory (a non-contiguous view)."""
    view = values.transpose(a, b).contiguous().transpose(a, b)
    assert not view.is_contiguous() and torch.equal(view, values)
    return view


def assert_within_spec(spec_name: str, dtype: str, got: torch.Tensor, want: torch.Tensor) -> None:
    tol = load_spec(SPECS / f"{spec_name}.yaml").tolerance(dtype)
    assert torch.isfinite(got).all(), "NaN in the output: an element outside a view was read, or never written"
    torch.testing.assert_close(got.double(), want, atol=tol.atol, rtol=tol.rtol)


# x [B, CIN, L] as: a slice of longer rows, every other element of a row, channels innermost.
CONV_X = {
    "row slice": lambda x: inside_nan(x, 2, pad=5, offset=2),
    "every other column": lambda x: inside_nan(x, 2, pad=1, step=2),
    "channels innermost": lambda x: transposed(x, 1, 2),
}


@pytest.mark.parametrize("layout", list(CONV_X))
@pytest.mark.parametrize("packed", [False, True])
def test_conv1d_reads_strided_operands_in_place(layout, packed, tmp_path):
    kernel = load_kernel("conv1d", tmp_path, packed_weight=packed)
    spy = kernel._conv1d_kernel = LaunchSpy(kernel._conv1d_kernel)
    batch, c_in, c_out, length, ksize = 2, 12, 10, 19, 3
    x = CONV_X[layout](torch.randn(batch, c_in, length))
    weight = transposed(torch.randn(c_out, c_in, ksize) / 6, 0, 2)  # KSIZE outermost in memory
    bias = inside_nan(torch.randn(c_out), 0, pad=3, step=2)  # every other element of a longer vector
    with torch.no_grad(), poisoned_allocations():
        out = kernel.conv1d_forward(x, weight, bias)
    want = F.conv1d(x.double(), weight.double(), bias.double(), padding=ksize // 2)
    assert_within_spec("conv1d", "float32", out, want)
    ((x_arg, w_arg, bias_arg, _),) = spy.launches
    assert x_arg.data_ptr() == x.data_ptr() and bias_arg.data_ptr() == bias.data_ptr()
    # The packed [KSIZE, COUT, CIN] weight is the kernel's own layout (a copy the module keeps);
    # unpacked, the caller's weight is read where it is.
    assert (w_arg.data_ptr() == weight.data_ptr()) is not packed


# (x [B, N, D], y [B, N, K]) as: x a slice of wider rows and y transposed (N innermost); x
# transposed and y every other sample of a batch, each row a slice of a wider one.
FM_LAYOUTS = {
    "x sliced, y transposed": lambda x, y: (inside_nan(x, 2, pad=8), transposed(y, 1, 2)),
    "x transposed, y strided": lambda x, y: (transposed(x, 1, 2), inside_nan(inside_nan(y, 2, pad=3), 0, 1, step=2)),
}


@pytest.mark.parametrize("layout", list(FM_LAYOUTS))
@pytest.mark.parametrize("k_major", [True, False])
def test_optimized_fm_reads_strided_operands_in_place(layout, k_major, tmp_path):
    kernel = load_kernel("optimized_fm", tmp_path, k_major=k_major, BLOCK_K=32, BLOCK_D=16)
    spy = kernel._fm_kernel = LaunchSpy(kernel._fm_kernel)
    batch, n, d, k = 2, 24, 40, 50
    x, y = FM_LAYOUTS[layout](torch.randn(batch, n, d) / (n * d) ** 0.25, torch.randn(batch, n, k))
    with torch.no_grad(), poisoned_allocations():
        out = kernel.optimized_fm(x, y)
    x64, y64 = x.double(), y.double()
    assert_within_spec("optimized_fm", "float32", out, torch.bmm(x64, torch.bmm(x64.transpose(1, 2), y64)))
    ((x_arg, y_arg, _),) = spy.launches
    assert (x_arg.data_ptr(), y_arg.data_ptr()) == (x.data_ptr(), y.data_ptr())
