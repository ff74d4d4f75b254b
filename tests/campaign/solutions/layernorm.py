import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(ok, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    y = d * tl.rsqrt(var + eps) * w + b
    tl.store(y_ptr + row * n + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.reshape(-1, n).contiguous()
        y = torch.empty_like(x2)
        _layernorm[(x2.shape[0],)](x2, self.norm.weight, self.norm.bias, y, n, self.norm.eps,
                                   BLOCK=triton.next_power_of_2(n))
        return y.view(x.shape)
