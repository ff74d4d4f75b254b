"""Where a call of the Gluon int8 decode kernel spends its time, per program: %globaltimer stamps at the
program's start, after q's split (the loop about to start), after the loop, after the warp merge and at the
end, with the SM it ran on. The stamps go into a copy of knowledge_base/kernels/_decode_hopper.py made here
(a STAMPS pointer after the kernel's tensors; the file itself is not changed), launched as decode() would
launch it, in a CUDA graph after an L2 flush (attention_bench.graph_us), so that the first stamp of a
replay is comparable across programs.

    python bench/investigations/int8_mqa_decode/decode_timeline.py [--shapes B:KV,...] [--flush-by read|write] [--out FILE.json]

Per shape: the median over programs of each phase, the spread of start and end times over the grid, and
the last program's phases (the one that sets the call's time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [
    str(Path(__file__).resolve().parents[2]),
    str(Path(__file__).resolve().parents[2] / "kernels" / "attention"),
]
from benchlib import KERNELS, REPO, load_module  # noqa: E402

PHASES = ["start", "q ready", "loop done", "merged", "end"]

STAMP_FN = """

@gluon.jit
def _stamp(STAMPS, slot: gl.constexpr, W: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
    i = gl.arange(0, 32 * W, layout=L)
    t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [i], dtype=gl.int64, is_pure=False, pack=1)
    sm = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [i], dtype=gl.int32, is_pure=False, pack=1)
    pid = gl.program_id(0) * gl.num_programs(1) + gl.program_id(1)
    gl.store(STAMPS + pid * 8 + slot + i, t, mask=i == 0)
    if slot == 0:
        gl.store(STAMPS + pid * 8 + 7 + i, sm.to(gl.int64), mask=i == 0)
"""

# (anchor line in _decode_hopper.py, stamp slot, insert before the anchor or after it)
ANCHORS = [
    ("    b = gl.program_id(0)\n", 0, "after"),
    ('    m_i = gl.full([W, ROWS], float("-inf"), gl.float32, ROW_L)\n', 1, "before"),
    ("    cp.wait_group(0)\n", 2, "after"),
    ("    if SPLIT:\n        part = ", 3, "before"),
]
END_ANCHOR = "        gl.store(O + b.to(gl.int64) * (ROWS * HEAD_DIM) + o_cols, out.to(O.dtype.element_ty))\n"


def instrumented_source() -> str:
    source = (KERNELS / "_decode_hopper.py").read_text()
    for anchor, slot, where in ANCHORS:
        if source.count(anchor) != 1:
            sys.exit(f"decode_timeline: _decode_hopper.py no longer has the line {anchor.strip()!r} once")
        stamp = f"    _stamp(STAMPS, {slot}, W)\n"
        source = source.replace(anchor, anchor + stamp if where == "after" else stamp + anchor)
    if source.count(END_ANCHOR) != 1:
        sys.exit("decode_timeline: _decode_hopper.py no longer stores its output where expected")
    source = source.replace(END_ANCHOR, END_ANCHOR + "        _stamp(STAMPS, 4, W)\n")
    combined = "            gl.atomic_xchg(COUNTERS + b, 0)\n"
    if source.count(combined) != 1:
        sys.exit("decode_timeline: _decode_hopper.py no longer resets its split counter where expected")
    source = source.replace(combined, combined + "            _stamp(STAMPS, 4, W)\n")
    signature = "    Q, KC, KS, VC, VS, O, PART_ACC, PART_ML, COUNTERS,\n"
    if source.count(signature) != 1:
        sys.exit("decode_timeline: the kernel's tensor parameters changed")
    source = source.replace(signature, "    Q, KC, KS, VC, VS, O, PART_ACC, PART_ML, COUNTERS, STAMPS,\n")
    return source + STAMP_FN


def load(source: str):
    """The stamped kernel as a module of its own file (Gluon reads a kernel's source from its file)."""
    path = Path(tempfile.mkdtemp(prefix="decode_timeline_")) / "_decode_hopper_stamped.py"
    path.write_text(source)
    return load_module(path, "_decode_hopper_stamped")


def run_shape(mod, decode_file, batch: int, kv_len: int, flush_by: str) -> dict:
    """mod: the stamped copy of _decode_hopper; decode_file: int8_mqa_decode.py, whose routing and CONFIG pick
    the launch shape. The plan is the one decode() would make (make_plan), plus the stamps."""
    import torch
    from attention_bench import graph_us

    ref = load_module(REPO / "specs" / "int8_mqa_decode.py", "ref_decode")
    q = torch.randn(batch, 16, 1, 128, device="cuda").to(torch.bfloat16)
    kc, ks = ref.quantize(torch.randn(batch, kv_len, 128, device="cuda"))
    vc, vs = ref.quantize(torch.randn(batch, kv_len, 128, device="cuda"))
    ks, vs = ks.to(torch.bfloat16), vs.to(torch.bfloat16)
    launch_shape = decode_file._gluon_serves(q, kc, ks, vc, vs)
    if launch_shape is None:
        sys.exit(f"decode_timeline: B{batch} KV{kv_len} is not served by the Gluon kernel here")
    warps, ctas = launch_shape
    plan = mod.make_plan(q, kc, ks, vc, vs, decode_file.arrival_counters, decode_file.CONFIG, warps, ctas)
    batch, splits = plan.grid
    out = torch.empty_like(q)
    buffers = (plan.part_acc, plan.part_ml, plan.counters) if splits > 1 else (out,) * 3
    stamps = torch.zeros(batch * splits * 8, dtype=torch.int64, device="cuda")

    def call():
        mod._decode_regs_kernel[plan.grid](q, kc, ks, vc, vs, out, *buffers, stamps, *plan.scalars, **plan.consts)

    us, _ = graph_us(call, flush_by=flush_by)  # the stamps kept are the last replay's
    s = stamps.view(-1, 8).cpu()
    t = s[:, :5].double() / 1e3  # ns -> us
    t = t - t[:, 0].min()
    # With splits only the program that combines stamps the end; the others end at their merge (their end
    # slot holds zeros or a stamp of an earlier replay, before this replay's start).
    t[:, 4] = torch.where(t[:, 4] >= t[:, 3], t[:, 4], t[:, 3])
    phases = {
        f"{PHASES[i]} -> {PHASES[i + 1]}": round(statistics.median((t[:, i + 1] - t[:, i]).tolist()), 3)
        for i in range(3)
    }
    ends = t[:, 4] - t[:, 3]
    if splits > 1:  # the combining programs only (the others have no such phase)
        ends = ends[t[:, 4] > t[:, 3]] if bool((t[:, 4] > t[:, 3]).any()) else ends
    phases["merged -> end"] = round(statistics.median(ends.tolist()), 3)
    last = int(t[:, 4].argmax())
    return {
        "shape": [batch, kv_len],
        "warps": warps,
        "splits": splits,
        "flush_by": flush_by,
        "graph_us": round(us, 2),
        "stamped_span_us": round(float(t[:, 4].max()), 3),
        "start_spread_us": round(float(t[:, 0].max()), 3),
        "end_min_median_max_us": [round(float(x), 3) for x in (t[:, 4].min(), t[:, 4].median(), t[:, 4].max())],
        "median_phase_us": phases,
        "last_program": {"sm": int(s[last, 7]), "stamps_us": [round(float(x), 3) for x in t[last]]},
        "sms_used": len(set(s[:, 7].tolist())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="256:1024,128:2048,64:4096,128:512", help="B:KV_LEN,...")
    parser.add_argument("--flush-by", choices=["read", "write"], default="read")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    try:
        shapes = [tuple(int(x) for x in item.split(":")) for item in args.shapes.split(",")]
        assert all(len(shape) == 2 for shape in shapes)
    except (ValueError, AssertionError):
        sys.exit(f"decode_timeline: --shapes wants B:KV_LEN,... (got {args.shapes!r})")
    import torch

    if not torch.cuda.is_available():
        sys.exit("decode_timeline: needs a CUDA GPU")
    decode_file = load_module(KERNELS / "int8_mqa_decode.py", "int8_mqa_decode")
    mod = load(instrumented_source())
    rows = [run_shape(mod, decode_file, b, kv, args.flush_by) for b, kv in shapes]
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
