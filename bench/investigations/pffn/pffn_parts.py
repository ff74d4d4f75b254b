"""Time the parts of PFFN on a GPU: the split mode's two kernels alone, cuBLAS's two
bmms alone, and a copy of the same bytes, so the split kernels' time can be read against what
each GEMM moves. Medians of triton.testing.do_bench; one JSON line per shape.

    python bench/investigations/pffn/pffn_parts.py [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, load_module  # noqa: E402

SHAPES = [
    (1024, 200, 256, 160),
    (1024, 200, 192, 96),
    (1024, 400, 256, 160),
    (1024, 150, 96, 192),
    (256, 200, 256, 160),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--config", default="{}", help="JSON CONFIG overrides for the split mode")
    args = parser.parse_args()
    pffn = load_module(KERNELS / "pffn.py", "pffn_parts_kernel")
    pffn.CONFIG.update({"mode": "split", "split_min_batch": 0, "fused_max_d": 0}, **json.loads(args.config))
    rows = []
    for b, n, d, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(b, n, d, device="cuda", generator=g).bfloat16()
        w1 = (torch.randn(b, d, k, device="cuda", generator=g) / d**0.5).bfloat16()
        w2 = (torch.randn(b, k, d, device="cuda", generator=g) / k**0.5).bfloat16()
        b1, g1 = torch.zeros(k, device="cuda").bfloat16(), torch.ones(k, device="cuda").bfloat16()
        b2, g2 = torch.zeros(d, device="cuda").bfloat16(), torch.ones(d, device="cuda").bfloat16()
        out = torch.empty_like(x)
        h = torch.empty(b, n, k, device="cuda", dtype=torch.bfloat16)
        cfg = pffn.CONFIG

        gelu = pffn._gelu_mode(cfg["gelu"], x.dtype)

        def up():
            pffn._launch_up(x, w1, b1, g1, h, 1e-6, cfg, gelu)

        def down():
            pffn._launch_down(h, w2, b2, g2, out, 1e-6, cfg)

        src = torch.empty(b * (n * d + d * k + n * k), device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        t = {
            "up": triton.testing.do_bench(up, rep=50),
            "down": triton.testing.do_bench(down, rep=50),
            "whole": triton.testing.do_bench(lambda: pffn.pffn_forward(x, w1, w2, b1, g1, b2, g2, 1e-6), rep=50),
            "bmm1": triton.testing.do_bench(lambda: torch.bmm(x, w1), rep=50),
            "bmm2": triton.testing.do_bench(lambda: torch.bmm(h, w2), rep=50),
            "copy_one_side": triton.testing.do_bench(lambda: dst.copy_(src), rep=50),
        }
        side = 2 * b * (n * d + d * k + n * k)  # bytes one GEMM side moves: X (or out), W, H
        row = {
            "shape": [b, n, d, k],
            "config": dict(cfg),
            "ms": t,
            "bytes_per_side": side,
            "GBps": {key: side / t[key] / 1e6 for key in ("up", "down", "bmm1", "bmm2")},
            "copy_GBps": 2 * side / t["copy_one_side"] / 1e6,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
