import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, LOW: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    if LOW:
        x = x.to(tl.bfloat16).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    if LOW:
        e = e.to(tl.bfloat16).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x, out=None, low=False):
    y = torch.empty_like(x) if out is None else out
    n = x.shape[-1]
    softmax_rows[(x.numel() // n,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n), LOW=low,
                                    num_warps=8)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return softmax(x)
