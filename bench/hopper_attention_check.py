"""Quick GPU check of knowledge_base/kernels/_flash_hopper.py (the Gluon flash-attention kernel) before
or after a benchmark: every tile configuration of bench/attention_bench.py's sweeps on ragged shapes
(flash attention causal and not, head dim 128, 64 for the first tiles, and int8_mqa_prefill's
multi-query layout) against float32 SDPA. One line per case, flushed: a hang shows how far it got.

    timeout 60 python bench/hopper_attention_check.py
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "knowledge_base" / "kernels"))
import _flash_hopper  # noqa: E402

TILES = [
    (128, 64, 4, 2, False),
    (64, 64, 4, 2, False),
    (64, 64, 4, 2, True),
    (64, 64, 4, 3, True),
    (128, 128, 8, 2, False),
    (128, 128, 8, 2, True),
    (128, 64, 8, 2, True),
]
CASES = [  # (batch, query heads, kv heads, seq, head dim): sequences of multiples of 16 as in the specs
    # (so that the benchmark reuses these compilations), not of the tiles (ragged last blocks).
    (1, 2, 2, 4096, 128),
    (2, 3, 3, 1008, 128),
    (2, 16, 1, 1040, 128),  # int8_mqa_prefill's layout: 16 query heads on one KV head
]
# The warp-specialised kernel (last: a protocol error would hang it): 128-row blocks, BLOCK_N x stages.
WS = [(128, 128, 4, 2, True), (128, 64, 4, 3, True)]
EXTRA = [(2, 2, 2, 208, 64)]  # head dim 64: the first tiles only


def main() -> None:
    torch.manual_seed(0)
    worst = 0.0
    for index, (bm, bn, warps, stages, q_in_regs) in enumerate(TILES + WS):
        ws = index >= len(TILES)
        config = {
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "num_warps": warps,
            "num_stages": stages,
            "Q_IN_REGS": q_in_regs,
            "WS": ws,
        }
        for batch, hq, hkv, seq, dim in CASES + (EXTRA if index == 0 else []):
            for causal in (False, True):
                q = torch.randn(batch, hq, seq, dim, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(batch, hkv, seq, dim, device="cuda", dtype=torch.bfloat16)
                v = torch.randn_like(k)
                out = torch.full_like(q, float("nan"))
                start = time.time()
                try:
                    _flash_hopper.attention(q, k, v, out, causal, config)
                    torch.cuda.synchronize()
                    ref = F.scaled_dot_product_attention(
                        q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=hkv != hq
                    )
                    err = (out.float() - ref).abs().max().item()
                    worst = max(worst, err)
                    status = "ok" if err < 0.02 else "WRONG"
                except Exception as exc:
                    status, err = f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", float("nan")
                print(
                    f"tiles {bm}x{bn} w{warps} s{stages} q_regs={q_in_regs} ws={ws} shape {batch}x{hq}/{hkv}x{seq}x{dim} causal={causal}: "
                    f"{status} max_err={err:.4g} {time.time() - start:.2f}s",
                    flush=True,
                )
    print(f"worst max_err {worst:.4g}", flush=True)


if __name__ == "__main__":
    main()
