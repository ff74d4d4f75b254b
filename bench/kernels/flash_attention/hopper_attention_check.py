"""Quick GPU check of knowledge_base/kernels/_flash_hopper.py (the Gluon flash-attention kernel) before
or after a benchmark: every tile configuration of bench/kernels/attention/attention_bench.py's sweeps on ragged shapes
(flash attention causal and not, head dim 128, 64 for the first tiles, and int8_mqa_prefill's
multi-query layout) against float32 SDPA. One line per case, flushed: a hang shows how far it got.

    timeout 60 python bench/kernels/flash_attention/hopper_attention_check.py [--ws-only] [--shard=I/N]   (exit status 1 if any case failed)

--shard=I/N checks every N-th configuration from the I-th (N processes compile in parallel).
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "knowledge_base" / "kernels"))
import _flash_hopper  # noqa: E402

TILES = [  # (BLOCK_M, BLOCK_N, warps, stages, Q in registers)
    (128, 64, 4, 2, False),
    (64, 64, 4, 2, False),
    (64, 64, 4, 2, True),
    (64, 64, 4, 3, True),
    (128, 128, 8, 2, False),
    (128, 128, 8, 2, True),
    (128, 64, 8, 2, True),
]
# The warp-specialised kernel (last: a protocol error would hang it): (BLOCK_N, stages, persistent 0/1/2, ping-pong);
# then persistent on 7 programs (several work units each at every shape).
WS = [
    (128, 2, 0, False),
    (128, 2, 0, True),
    (128, 2, 1, True),
    (128, 2, 2, False),
    (128, 2, 2, True),
    (128, 3, 1, True),
]
CONFIGS = (
    [{"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s, "Q_IN_REGS": r} for m, n, w, s, r in TILES]
    + [
        {"BLOCK_M": 128, "BLOCK_N": n, "num_warps": 4, "num_stages": s, "WS": True, "PERSISTENT": p, "PINGPONG": pp}
        for n, s, p, pp in WS
    ]
    + [
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2, "WS": True, "PERSISTENT": True}
        | {"PROGRAMS": 7, "PINGPONG": pp, "PERSISTENT": p}
        for p, pp in ((1, True), (2, False), (2, True))
    ]
)
CASES = [  # (batch, query heads, kv heads, seq, head dim): sequences of multiples of 16 as in the specs
    # (so that the benchmark reuses these compilations), not of the blocks (ragged last blocks).
    (1, 2, 2, 4096, 128),
    (2, 3, 3, 1008, 128),
    (2, 16, 1, 1040, 128),  # int8_mqa_prefill's layout: 16 query heads on one KV head
]
EXTRA = [(2, 2, 2, 208, 64)]  # head dim 64: the first tiles only


def main() -> None:
    torch.manual_seed(0)
    worst, failures = 0.0, 0
    configs = [c for c in CONFIGS if c.get("WS")] if "--ws-only" in sys.argv else CONFIGS
    shard = next((a.split("=")[1] for a in sys.argv if a.startswith("--shard=")), "0/1")
    index, count = (int(x) for x in shard.split("/"))  # --shard=i/n: every n-th configuration from the i-th
    configs = configs[index::count]
    for position, config in enumerate(configs):
        for batch, hq, hkv, seq, dim in CASES + (EXTRA if position == 0 else []):
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
                    failures += status != "ok"
                except Exception as exc:
                    failures += 1
                    status, err = f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", float("nan")
                print(
                    f"{config} shape {batch}x{hq}/{hkv}x{seq}x{dim} causal={causal}: "
                    f"{status} max_err={err:.4g} {time.time() - start:.2f}s",
                    flush=True,
                )
    print(f"worst max_err {worst:.4g}", flush=True)
    sys.exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
