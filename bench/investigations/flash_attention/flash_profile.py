"""One call each of the flash-attention kernel (its CONFIG, optionally overridden) and of SDPA at the
spec's shapes, for a profiler to look at (the kernels are warmed up first, then run once between
torch.cuda.profiler start/stop markers; one call of ours per CONFIG variant):

    ncu --profile-from-start off --section SpeedOfLight --section ComputeWorkloadAnalysis \\
        python bench/investigations/flash_attention/flash_profile.py [--causal 0|1] [--configs '[{}, {"IMPL": "gluon"}]'] [--prefill]

--prefill profiles int8_mqa_prefill (B32 S1024, 16 query heads on one int8 KV head) and bf16 SDPA instead.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "knowledge_base" / "kernels"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--causal", type=int, default=1)
    parser.add_argument("--configs", default="[{}]", help="JSON list of CONFIG overrides: one call of ours for each")
    parser.add_argument("--prefill", action="store_true")
    args = parser.parse_args()
    causal = bool(args.causal)
    torch.manual_seed(0)
    if args.prefill:
        import int8_mqa_prefill as kernel

        batch, heads, seq, dim = 32, 16, 1024, 128
        q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16)
        codes = [torch.randint(-127, 128, (batch, seq, dim), device="cuda", dtype=torch.int8) for _ in range(2)]
        scales = [torch.rand(batch, seq, device="cuda", dtype=torch.bfloat16) / 64 for _ in range(2)]
        k, v = ((c.to(torch.bfloat16) * s[..., None]).unsqueeze(1) for c, s in zip(codes, scales))
        ours = lambda: kernel.int8_mqa_prefill(q, codes[0], scales[0], codes[1], scales[1], causal)  # noqa: E731
        base = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)  # noqa: E731
    else:
        import flash_attention as kernel

        q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ours = lambda: kernel.flash_attention(q, k, v, causal)  # noqa: E731
        base = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    defaults = dict(kernel.CONFIG)
    variants = json.loads(args.configs)

    def run_all():
        for overrides in variants:
            kernel.CONFIG.clear()
            kernel.CONFIG.update(defaults, **overrides)
            ours()
        base()

    for _ in range(3):
        run_all()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run_all()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled", kernel.__name__, variants, "and SDPA,", "causal" if causal else "full")


if __name__ == "__main__":
    main()
