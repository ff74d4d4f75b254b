"""What a decode launch costs before it reads a byte: graph time (bench/kernels/attention/attention_bench.py's graph_us, L2
flushed before each call) of a Gluon kernel that only writes one word a program, with and without the
shared memory the int8 decode kernel takes (128 KB a program here, 134 KB in the decode at 8 warps: the carveout differs
from the flush kernel's), at the decode's grids.

    python bench/investigations/int8_mqa_decode/decode_launch_floor.py [--flush-by read|write] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path[:0] = [
    str(Path(__file__).resolve().parents[2]),
    str(Path(__file__).resolve().parents[2] / "kernels" / "attention"),
]
from attention_bench import graph_us  # noqa: E402


@gluon.jit
def _touch(X, SMEM: gl.constexpr, W: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
    offs = gl.arange(0, 32 * W, layout=L)
    value = gl.zeros([32 * W], gl.int32, L) + gl.program_id(0)
    if SMEM > 0:  # held for the whole program, as the decode kernel holds its rings
        buf = gl.allocate_shared_memory(gl.int32, [SMEM // 4], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        buf.slice(0, 32 * W).store(value)
        value = buf.slice(0, 32 * W).load(L)
    gl.store(X + gl.program_id(0) * 32 * W + offs, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flush-by", choices=["read", "write"], default="read")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("decode_launch_floor: needs a CUDA GPU")
    rows = []
    for programs, warps, smem in [
        (128, 8, 0),
        (128, 8, 32 * 1024),
        (128, 8, 64 * 1024),
        (128, 8, 128 * 1024),
        (256, 4, 0),
        (256, 4, 64 * 1024),
    ]:
        x = torch.empty(programs * 32 * warps, dtype=torch.int32, device="cuda")
        call = lambda: _touch[(programs,)](x, SMEM=smem, W=warps, num_warps=warps)  # noqa: E731
        call()
        us, _ = graph_us(call, flush_by=args.flush_by)
        right = bool((x.view(programs, -1) == torch.arange(programs, device="cuda")[:, None]).all())
        rows.append(
            {"programs": programs, "warps": warps, "smem_bytes": smem, "graph_us": round(us, 2), "right": right}
        )
        print(json.dumps(rows[-1] | {"flush_by": args.flush_by}), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"flush_by": args.flush_by, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
