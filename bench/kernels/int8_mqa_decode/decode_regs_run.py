"""int8 MQA decode on one GPU: the register-resident Gluon kernel (knowledge_base/kernels/_decode_hopper.py)
in several configurations against the tl kernel and SDPA on the pre-dequantised bf16 cache, all in one
process per configuration (a hang or crash names its configuration and does not stop the others).

    python bench/kernels/int8_mqa_decode/decode_regs_run.py --out DIR [--configs NAME,...] [--timeout-s 90]

Per configuration: NaN-poisoned outputs checked against the float32 computation on ragged and extreme
inputs (a KV length that is no multiple of a step, fewer keys than one step, q rows of 1e5 and 1e-6 with V
scales of 1e-6, a cache read through a wider buffer) and at the spec's shapes; then, at the spec's shapes,
the device time of one call in a CUDA graph with L2 flushed before each call (bench/kernels/attention/attention_bench.py's
graph_us: how decode is served) and triton.testing.do_bench's median (L2 flushed, host launch included
where it outlasts the flush, as the evaluator times). Every result is one JSON line on stdout and in
DIR/decode_regs.jsonl; a markdown table follows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SPEC_SHAPES = [(256, 1024, 1), (128, 2048, 1), (64, 4096, 1), (64, 4096, 4)]
GLUON = {"IMPL": "auto"}
CONFIGS = {  # name: CONFIG overrides of int8_mqa_decode.py (w warps, k keys a warp-step, s stages, c programs/SM, L lazy rescale)
    "tl": {"IMPL": "triton"},
    "default": {},  # the file's CONFIG as it is
    "w4k16s4c3": dict(GLUON, REGS_WARPS=4, REGS_KEYS=16, REGS_STAGES=4, REGS_CTAS_PER_SM=3),
    "w4k16s4c2": dict(GLUON, REGS_WARPS=4, REGS_KEYS=16, REGS_STAGES=4, REGS_CTAS_PER_SM=2),
    "w4k32s2c2": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=2),
    "w4k32s3c2": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=3, REGS_CTAS_PER_SM=2),
    "w4k32s2c2L": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=2, REGS_LAZY_RESCALE=True),
    "w4k32s3c2L": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=3, REGS_CTAS_PER_SM=2, REGS_LAZY_RESCALE=True),
    "w4k16s4c3L": dict(GLUON, REGS_WARPS=4, REGS_KEYS=16, REGS_STAGES=4, REGS_CTAS_PER_SM=3, REGS_LAZY_RESCALE=True),
    "w2k32s2c4": dict(GLUON, REGS_WARPS=2, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=4),
    "w2k32s2c6": dict(GLUON, REGS_WARPS=2, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=6),
    "w2k16s4c6": dict(GLUON, REGS_WARPS=2, REGS_KEYS=16, REGS_STAGES=4, REGS_CTAS_PER_SM=6),
    "w1k16s4c8": dict(GLUON, REGS_WARPS=1, REGS_KEYS=16, REGS_STAGES=4, REGS_CTAS_PER_SM=8),
    # more programs an SM, 8 warps
    "w4k32s2c3": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=3),
    "w4k32s3c3": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=3, REGS_CTAS_PER_SM=3),
    "w4k32s2c4": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=4),
    "w8k32s2c1": dict(GLUON, REGS_WARPS=8, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=1),
    "w8k32s2c2": dict(GLUON, REGS_WARPS=8, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=2),
    # 8 warps, other keys and stages (first timed before the running V-scale maximum replaced the pre-pass, as "...V")
    "w8k32s3c1": dict(GLUON, REGS_WARPS=8, REGS_KEYS=32, REGS_STAGES=3, REGS_CTAS_PER_SM=1),
    "w8k16s2c1": dict(GLUON, REGS_WARPS=8, REGS_KEYS=16, REGS_STAGES=2, REGS_CTAS_PER_SM=1),
    "w8k16s3c1": dict(GLUON, REGS_WARPS=8, REGS_KEYS=16, REGS_STAGES=3, REGS_CTAS_PER_SM=1),
    "w8k16s4c1": dict(GLUON, REGS_WARPS=8, REGS_KEYS=16, REGS_STAGES=4, REGS_CTAS_PER_SM=1),
    "w8k16s6c1": dict(GLUON, REGS_WARPS=8, REGS_KEYS=16, REGS_STAGES=6, REGS_CTAS_PER_SM=1),
    "w4k32s2c2all": dict(GLUON, REGS_WARPS=4, REGS_KEYS=32, REGS_STAGES=2, REGS_CTAS_PER_SM=2, REGS_ONE_WAVE=False),
}


def kv_bytes(batch: int, kv_len: int) -> int:
    return 2 * batch * kv_len * 128 + 2 * 2 * batch * kv_len  # int8 codes + bf16 scales, K and V


def child(name: str, flush_by: str = "write", shapes: list | None = None) -> None:
    """One configuration: checks, then timings; one JSON line per result."""
    import torch

    sys.path[:0] = [str(REPO / "bench"), str(REPO / "bench" / "kernels" / "attention")]
    from attention_bench import bench, graph_us, poisoned
    from benchlib import KERNELS, load_module

    import _decode_hopper as hopper

    kernel = load_module(KERNELS / "int8_mqa_decode.py", "int8_mqa_decode")
    kernel.CONFIG.update(CONFIGS[name])
    ref = load_module(REPO / "specs" / "int8_mqa_decode.py", "ref_decode")

    def make(batch, kv_len, q_len, seed=0, heads=16, wide=1):
        g = torch.Generator(device="cuda").manual_seed(seed)
        q = torch.randn(batch, heads, q_len, 128, device="cuda", generator=g).to(torch.bfloat16)
        out = []
        for _ in range(2):
            x = torch.randn(batch, kv_len * wide, 128, device="cuda", generator=g)
            codes, scale = ref.quantize(x)
            out += [codes[:, :kv_len], scale.to(torch.bfloat16)[:, :kv_len]]
        return [q, out[0], out[1], out[2], out[3]]

    def expected(xs):
        q, kc, ks, vc, vs = xs
        k = kc.float() * ks.float()[..., None]
        v = vc.float() * vs.float()[..., None]
        s = torch.einsum("bhqd,bkd->bhqk", q.float(), k) / 128**0.5
        return torch.einsum("bhqk,bkd->bhqd", torch.softmax(s, -1), v)

    def check(label, xs, relative=False):
        want = expected(xs)
        scale = want.abs().amax() if relative else 1.0
        ok, worst = True, 0.0
        for _ in range(2):  # the first call through the JIT, the second by the plan's direct launch
            with torch.no_grad():
                out = poisoned(lambda: kernel.int8_mqa_decode(*xs))
                torch.cuda.synchronize()
            diff = ((out.float() - want) / scale).abs()
            ok &= bool(torch.isfinite(out).all()) and bool((diff <= 0.02 + 0.02 * (want / scale).abs()).all())
            worst = max(worst, diff.max().item())
        gluon = hopper.aligned(*xs) and kernel._gluon_serves(*xs)  # the route int8_mqa_decode takes
        path = "gluon w%dc%d" % gluon if gluon else "tl"
        print(
            json.dumps(
                {
                    "config": name,
                    "check": label,
                    "path": path,
                    "correct": ok,
                    "max_abs_err": round(worst, 5),
                }
            ),
            flush=True,
        )
        return ok

    ok = True
    ok &= check("B3 KV1000 (ragged, unaligned strides: the tl kernel)", make(3, 1000, 1, seed=1))
    ok &= check("B3 KV1000 in a KV2000 buffer (ragged)", make(3, 1000, 1, seed=1, wide=2))
    ok &= check("B2 KV72 in a KV144 buffer (under one step)", make(2, 72, 1, seed=2, wide=2))
    ok &= check("B5 KV512 codes in a wider buffer", make(5, 512, 1, seed=3, wide=2))
    xs = make(2, 256, 1, seed=4)
    xs[0] = xs[0] * torch.tensor([1e5, 1e-6, 1.0, 3e4] * 4, dtype=torch.bfloat16, device="cuda")[None, :, None, None]
    xs[4] = xs[4] * 1e-6
    ok &= check("B2 KV256 q rows 1e5..1e-6, V scales 1e-6", xs, relative=True)
    for batch, kv_len, q_len in shapes or SPEC_SHAPES:
        xs = make(batch, kv_len, q_len, seed=5)
        ok &= check(f"{'' if shapes else 'spec '}B{batch} KV{kv_len} Q{q_len}", xs)
        with torch.no_grad():
            for _ in range(2):  # the split counters back at zero between calls
                kernel.int8_mqa_decode(*xs)
            us, out = graph_us(lambda: kernel.int8_mqa_decode(*xs), flush_by=flush_by)
            want = expected(xs)
            graph_ok = bool(((out.float() - want).abs() <= 0.02 + 0.02 * want.abs()).all())
            ms = bench(lambda: kernel.int8_mqa_decode(*xs))
        nbytes = kv_bytes(batch, kv_len)
        row = {"config": name, "shape": [batch, kv_len, q_len], "graph_us": round(us, 2), "graph_correct": graph_ok}
        row["flush_by"] = flush_by
        row.update({"KV_TB/s": round(nbytes / us / 1e6, 3), "do_bench_us": round(ms * 1e3, 2)})
        if name == "tl":  # the baselines, once
            k = ref.dequantize(xs[1], xs[2], torch.bfloat16).unsqueeze(1)
            v = ref.dequantize(xs[3], xs[4], torch.bfloat16).unsqueeze(1)
            sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(xs[0], k, v, enable_gqa=True)  # noqa: E731
            row["sdpa_bf16_graph_us"] = round(graph_us(sdpa, flush_by=flush_by)[0], 2)
        print(json.dumps(row), flush=True)
    print(json.dumps({"config": name, "all_correct": ok}), flush=True)


def table(rows: list[dict]) -> str:
    timed = [r for r in rows if "graph_us" in r]
    base = {tuple(r["shape"]): r for r in timed if r["config"] == "tl"}
    lines = [
        "| config | shape (B, KV, Q_LEN) | graph us | KV TB/s | do_bench us | x tl (graph) | SDPA bf16 graph us |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in timed:
        b = base.get(tuple(r["shape"]))
        ratio = f"{b['graph_us'] / r['graph_us']:.2f}" if b else ""
        lines.append(
            f"| {r['config']} | {tuple(r['shape'])} | {r['graph_us']} | {r['KV_TB/s']} | {r['do_bench_us']} | {ratio} | {r.get('sdpa_bf16_graph_us', '')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for decode_regs.jsonl and decode_regs.md")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of: {', '.join(CONFIGS)}")
    parser.add_argument("--timeout-s", type=float, default=90.0, help="per configuration")
    parser.add_argument(
        "--eval-best",
        action="store_true",
        help="then `kernelevolve eval` of the fastest configuration right everywhere",
    )
    parser.add_argument("--eval", default=None, help="only `kernelevolve eval` of this configuration (no timing runs)")
    parser.add_argument(
        "--flush-by", choices=["write", "read"], default="write", help="how L2 is flushed before each graph-timed call"
    )
    parser.add_argument(
        "--shapes", default=None, help="B:KV_LEN:Q_LEN,... to time instead of the spec's shapes (all checks still run)"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        shapes = [tuple(int(x) for x in item.split(":")) for item in args.shapes.split(",")] if args.shapes else None
    except ValueError:
        sys.exit(f"decode_regs_run: --shapes wants B:KV_LEN:Q_LEN,... (got {args.shapes!r})")
    if shapes and any(len(shape) != 3 for shape in shapes):
        sys.exit(f"decode_regs_run: --shapes wants B:KV_LEN:Q_LEN,... (got {args.shapes!r})")
    if args.child:
        return child(args.child, args.flush_by, shapes)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.eval:
        return evaluate(args.eval, args.out)
    rows = []
    for name in args.configs.split(","):
        if name not in CONFIGS:
            sys.exit(f"decode_regs_run: unknown configuration {name!r} (known: {', '.join(CONFIGS)})")
        start = time.time()
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--out", str(args.out), "--child", name, "--flush-by", args.flush_by]
                + (["--shapes", args.shapes] if args.shapes else []),
                capture_output=True, text=True, timeout=args.timeout_s,
            )  # fmt: skip
            lines, err = proc.stdout.splitlines(), proc.stderr.strip().splitlines()[-3:] if proc.returncode else []
        except subprocess.TimeoutExpired as exc:
            lines, err = (exc.stdout or b"").decode().splitlines(), [f"timed out after {args.timeout_s:.0f} s"]
        got = [json.loads(line) for line in lines if line.startswith("{")]
        if err:
            got.append({"config": name, "error": " | ".join(err)[:600]})
        got.append({"config": name, "seconds": round(time.time() - start, 1)})
        with open(args.out / "decode_regs.jsonl", "a") as f:
            for row in got:
                print(json.dumps(row), flush=True)
                f.write(json.dumps(row) + "\n")
        rows += got
    md = table(rows)
    (args.out / "decode_regs.md").write_text(md + "\n")
    print(md)
    if args.eval_best:
        evaluate_best(rows, args.out)


def evaluate_best(rows: list[dict], out: Path) -> None:
    """kernelevolve eval of the configuration with the smallest geometric-mean graph time over the spec's
    shapes, among those right on every check (a copy of the kernel file with that CONFIG)."""
    import math

    right = {r["config"] for r in rows if r.get("all_correct")}
    times: dict[str, list[float]] = {}
    for r in rows:
        if r.get("config") in right and "graph_us" in r and r.get("graph_correct"):
            times.setdefault(r["config"], []).append(r["graph_us"])
    full = {k: v for k, v in times.items() if len(v) == len(SPEC_SHAPES)}
    if not full:
        print("eval: no configuration right everywhere with every shape timed")
        return
    evaluate(min(full, key=lambda k: math.prod(full[k]) ** (1 / len(full[k]))), out)


def evaluate(best: str, out: Path) -> None:
    """A copy of the kernel file with CONFIGS[best] as its CONFIG, through `kernelevolve eval --device cuda`."""
    if best not in CONFIGS:
        sys.exit(f"decode_regs_run: unknown configuration {best!r} (known: {', '.join(CONFIGS)})")
    from kernelevolve.operators.tunables import rewrite_config

    text = rewrite_config((REPO / "knowledge_base" / "kernels" / "int8_mqa_decode.py").read_text(), CONFIGS[best])
    candidate = out / f"candidate_{best}.py"
    candidate.write_text(text)
    cmd = [
        sys.executable,
        "-m",
        "kernelevolve",
        "eval",
        "specs/int8_mqa_decode.yaml",
        str(candidate),
        "--device",
        "cuda",
        "--json",
    ]
    print("eval:", best, " ".join(cmd[1:]), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=240)
    (out / f"eval_{best}.json").write_text(proc.stdout)
    print(proc.stdout[-3000:], proc.stderr[-1500:], flush=True)


if __name__ == "__main__":
    main()
