"""Reference: multi-query attention prefill over int8 K/V with per-token scales.

    q                 [BATCH, Q_HEADS, SEQ_LEN, HEAD_DIM]  queries, bf16
    k_codes, v_codes  [BATCH, SEQ_LEN, HEAD_DIM] int8      the one KV head all Q_HEADS share
    k_scale, v_scale  [BATCH, SEQ_LEN]                     per-token scales: K = k_codes * k_scale[..., None]
    out               [BATCH, Q_HEADS, SEQ_LEN, HEAD_DIM] = softmax(q K^T / sqrt(HEAD_DIM) [+ causal mask]) V

CAUSAL=1 masks keys after the query's position. The reference dequantises in float (float32, or
float64 for the check) and runs SDPA on the dequantised cache in the queries' dtype: on a GPU in
bf16 that is what a user would otherwise run (dequantise, then SDPA with enable_gqa).
get_inputs quantises Gaussian K and V per token (scale = max |x| / 127, codes rounded).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
SEQ_LEN = 1024
CAUSAL = 1
Q_HEADS = 16
HEAD_DIM = 128


def dequantize(codes, scale, dtype):
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    return (codes.to(wide) * scale.to(wide)[..., None]).to(dtype)


def quantize(x):
    scale = x.abs().amax(-1).clamp_min(1e-6) / 127.0
    return torch.round(x / scale[..., None]).clamp(-127, 127).to(torch.int8), scale


class Model(nn.Module):
    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q, k_codes, k_scale, v_codes, v_scale):
        k = dequantize(k_codes, k_scale, q.dtype).unsqueeze(1)
        v = dequantize(v_codes, v_scale, q.dtype).unsqueeze(1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=True)


def get_inputs():
    q = torch.randn(BATCH, Q_HEADS, SEQ_LEN, HEAD_DIM)
    k_codes, k_scale = quantize(torch.randn(BATCH, SEQ_LEN, HEAD_DIM))
    v_codes, v_scale = quantize(torch.randn(BATCH, SEQ_LEN, HEAD_DIM))
    return [q, k_codes, k_scale, v_codes, v_scale]


def get_init_inputs():
    return [bool(CAUSAL)]
