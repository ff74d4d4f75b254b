"""How fast can one launch read an int8 MQA decode's KV cache on this GPU? A Triton kernel that only reads the
spec's K and V codes and scales (16-byte loads, summed into one word a program so nothing is optimised away),
timed the way bench/kernels/int8_mqa_decode/decode_regs_run.py times the decode kernels (a CUDA graph, L2 flushed before each call):
the floor for any decode kernel that reads the same bytes in one launch.

    python bench/investigations/int8_mqa_decode/decode_read_roofline.py [--out FILE.json] [--sweep full|best] [--flush-by write|read]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[3]
SHAPES = [(256, 1024), (128, 2048), (64, 4096)]


@triton.jit
def _read_words(X, OUT, n_words, BLOCK: tl.constexpr, PER_PROGRAM: tl.constexpr):
    """Sum of PER_PROGRAM blocks of int32 words (xor-folded), one word a program."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(PER_PROGRAM):
        idx = (pid * PER_PROGRAM + i) * BLOCK + offs
        acc ^= tl.load(X + idx, mask=idx < n_words, other=0)
    tl.store(OUT + pid, tl.sum(acc, 0))


@triton.jit
def _read_words_unrolled(X, OUT, n_words, BLOCK: tl.constexpr, PER_PROGRAM: tl.constexpr):
    """As _read_words, the blocks' loads unrolled (all of a program's loads in flight at once)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in tl.static_range(PER_PROGRAM):
        idx = (pid * PER_PROGRAM + i) * BLOCK + offs
        acc ^= tl.load(X + idx, mask=idx < n_words, other=0)
    tl.store(OUT + pid, tl.sum(acc, 0))


def read_all(
    words: torch.Tensor, out: torch.Tensor, per_program: int, block: int, warps: int = 4, unrolled: bool = False
) -> torch.Tensor:
    n = words.numel()
    grid = (triton.cdiv(n, block * per_program),)
    kernel = _read_words_unrolled if unrolled else _read_words
    kernel[grid](words, out, n, BLOCK=block, PER_PROGRAM=per_program, num_warps=warps)
    return out


# (per_program, block, warps, unrolled): the first four launch shapes measured, then smaller work a program,
# more warps, unrolled loads
SWEEP = [(4, 1024, 4, False), (8, 1024, 4, False), (16, 1024, 4, False), (8, 2048, 4, False)] + [
    (p, b, w, u) for u in (False, True) for w in (4, 8) for b in (512, 1024, 2048) for p in (1, 2, 4)
]
# --sweep best: SWEEP's first shape and the six fastest of SWEEP on the H200 (22.09-22.40 us,
# bench/results/attention/h200/2026-11-27_decode_read_floor_prefill_sass/read_roofline_call1.json)
BEST = [(4, 1024, 4, False), (4, 1024, 8, False), (2, 512, 4, False), (1, 2048, 8, True), (2, 1024, 4, True)]
BEST += [(1, 1024, 4, True), (4, 512, 8, True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the results")
    parser.add_argument("--sweep", choices=["full", "best"], default="full", help="launch shapes to time")
    parser.add_argument(
        "--flush-by", choices=["write", "read"], default="write", help="how L2 is flushed before each call (graph_us)"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("decode_read_roofline: needs a CUDA GPU")
    sys.path.insert(0, str(REPO / "bench" / "kernels" / "attention"))
    from attention_bench import graph_us

    rows = []
    # The three shapes hold the same bytes (68.2 MB); then one 1 GB read for the steady-state bandwidth.
    spec_bytes = {2 * batch * kv_len * 128 + 2 * 2 * batch * kv_len for batch, kv_len in SHAPES}
    assert len(spec_bytes) == 1, spec_bytes
    sizes = {"spec": spec_bytes.pop(), "1GB": 2**30}
    for label, nbytes in sizes.items():
        # K and V codes and bf16 scales, as one buffer of int32 words (the same bytes, one launch)
        words = torch.randint(-(2**31), 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
        best = None
        for per_program, block, warps, unrolled in (
            (SWEEP if args.sweep == "full" else BEST) if label != "1GB" else SWEEP[:1]
        ):
            out = torch.empty(triton.cdiv(words.numel(), block * per_program), dtype=torch.int32, device="cuda")
            us, _ = graph_us(lambda: read_all(words, out, per_program, block, warps, unrolled), flush_by=args.flush_by)
            row = {"size": str(label), "MB": round(nbytes / 1e6, 1), "per_program": per_program, "block": block}
            row["flush_by"] = args.flush_by
            row.update(warps=warps, unrolled=unrolled, graph_us=round(us, 2), TB_s=round(nbytes / us / 1e6, 3))
            print(json.dumps(row), flush=True)
            rows.append(row)
            best = row if best is None or row["graph_us"] < best["graph_us"] else best
        print(f"{label}: best read {best['graph_us']} us = {best['TB_s']} TB/s", flush=True)
        del words
    if args.out:
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
