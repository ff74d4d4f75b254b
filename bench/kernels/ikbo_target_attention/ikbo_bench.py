"""IKBO target attention on one GPU: every variant checked, then timed beside the baselines.

    python bench/kernels/ikbo_target_attention/ikbo_bench.py --out DIR [--variants sweep|sweep1|sweep2|default|NAME,NAME] [--warm-workers 12]
                               [--deadline-s 140] [--no-compile]

At the production shape of specs/ikbo_target_attention.yaml, in bf16: each variant (a CONFIG of
knowledge_base/kernels/ikbo_target_attention.py, VARIANTS below) is first checked against the fp32
reference on two fresh random draws (output memory poisoned with NaN), then timed with
triton.testing.do_bench (median, L2 flushed) and by torch.profiler (device time of the kernel, 20
calls back to back). Baselines in the same process: the spec's reference (broadcast + SDPA), SDPA on
pre-broadcast K/V, torch.compile of the reference, and a bf16 8192^3 matmul as the tensor-core
ceiling. TFLOP/s by the spec's `flops`. Kernels are compiled first by worker processes (Triton's
disk cache carries them over). Writes DIR/ikbo_bench.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1] / "attention")]
from attention_kernels import (  # noqa: E402
    bench,
    check,
    fp32_reference,
    kernel_breakdown,
    make_inputs,
    poison_allocator,
)
from benchlib import KERNELS, REPO, load_module  # noqa: E402

from kernelevolve.spec import Case, load_spec  # noqa: E402

NAME = "ikbo_target_attention"
BASE = {
    "BLOCK_M": 64,
    "BLOCK_N": 64,
    "num_warps": 4,
    "num_stages": 3,
    "USE_TMA": True,
    "PERSISTENT": 0,
    "WARP_SPECIALIZE": False,
    "MAXNREG": 0,
    "Q_IN_REGS": False,
    "PREFETCH": 0,
    "STREAM_QO": False,
    "IMPL": "triton",
    "HOPPER_BLOCK_N": 128,
    "HOPPER_STAGES": 2,
    "HOPPER_PERSISTENT": 1,
    "HOPPER_PINGPONG": True,
    "HOPPER_DEFER_STORE": False,
    "HOPPER_TMA_STORE": False,
}
TL_DEFAULT = {"BLOCK_M": 128, "num_warps": 8, "num_stages": 2, "MAXNREG": 128}  # the tl kernel's default
# the Gluon kernel (_ikbo_hopper.py): loader warp + two consumer warpgroups, one candidate each
GLUON = {
    f"g_n{n}_s{s}_p{p}{'_pp' if pp else ''}": dict(
        TL_DEFAULT, IMPL="gluon", HOPPER_BLOCK_N=n, HOPPER_STAGES=s, HOPPER_PERSISTENT=p, HOPPER_PINGPONG=pp
    )
    for n, s, p, pp in [
        (128, 2, 1, True),
        (128, 2, 1, False),
        (128, 2, 0, True),
        (128, 2, 0, False),
        (64, 2, 1, True),
        (64, 3, 1, True),
        (64, 4, 1, True),
        (64, 3, 1, False),
        (128, 3, 1, True),
        (64, 4, 0, True),
    ]
}
# then: the output of an item stored under the next item's first Q K^T (HOPPER_DEFER_STORE)
GLUON.update(
    {
        name + "_ds": dict(cfg, HOPPER_DEFER_STORE=True)
        for name, cfg in list(GLUON.items())
        if cfg["HOPPER_PERSISTENT"] and name in ("g_n128_s2_p1_pp", "g_n128_s2_p1", "g_n64_s3_p1_pp", "g_n64_s4_p1_pp")
    }
)
# the output through shared memory and one TMA copy a consumer (HOPPER_TMA_STORE)
GLUON.update(
    {
        name + "_ts": dict(cfg, HOPPER_TMA_STORE=True)
        for name, cfg in list(GLUON.items())
        if name in ("g_n128_s2_p1_pp", "g_n128_s2_p1", "g_n64_s3_p1_pp", "g_n128_s2_p0_pp")
    }
)
# name -> CONFIG changes from BASE (the first tl default). Why each: 128-row tiles halve the K/V bytes
# read from L2 per FLOP (64-row tiles need ~7 TB/s of L2 reads at 474 TFLOP/s); 4 warps x 254
# registers or 8 warps capped at 128 registers keep two programs an SM; persistent programs skip the
# per-tile launch and keep consecutive tiles (one user) in flight; Q in registers takes Q's re-reads
# off shared memory, whose bandwidth the 64-wide Q K^T wgmma (Q and K from shared memory) saturates;
# 64x32 tiles, 3 stages, Q in registers and 168 registers fit three programs an SM.
VARIANTS = {
    "m64_n64_w4_s3": {},
    "m64_n64_w4_s3_p2": {"PERSISTENT": 2},
    "m64_n64_w4_s2": {"num_stages": 2},
    "m128_n64_w4_s2": {"BLOCK_M": 128, "num_stages": 2},
    "m128_n64_w4_s2_p2": {"BLOCK_M": 128, "num_stages": 2, "PERSISTENT": 2},
    "m128_n64_w4_s2_ptr": {"BLOCK_M": 128, "num_stages": 2, "USE_TMA": False},
    "m128_n32_w4_s3": {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 3},
    "m128_n32_w4_s4": {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 4},
    "m128_n64_w8_s2_r128": {"BLOCK_M": 128, "num_warps": 8, "num_stages": 2, "MAXNREG": 128},
    "m128_n64_w8_s2_r128_p2": {"BLOCK_M": 128, "num_warps": 8, "num_stages": 2, "MAXNREG": 128, "PERSISTENT": 2},
    "m128_n32_w8_s3_r128": {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3, "MAXNREG": 128},
    "m64_n64_w4_s2_qreg": {"num_stages": 2, "Q_IN_REGS": True},
    "m64_n64_w4_s3_qreg": {"Q_IN_REGS": True},
    "m64_n32_w4_s3_qreg_r168": {"BLOCK_N": 32, "Q_IN_REGS": True, "MAXNREG": 168},
    "m128_n64_w4_s2_qreg": {"BLOCK_M": 128, "num_stages": 2, "Q_IN_REGS": True},
    "m128_n64_w8_s2_r128_qreg": {"BLOCK_M": 128, "num_warps": 8, "num_stages": 2, "MAXNREG": 128, "Q_IN_REGS": True},
    "m256_n64_w8_s2_r128": {"BLOCK_M": 256, "num_warps": 8, "num_stages": 2, "MAXNREG": 128},
    # second sweep: the L2 is flushed before every timed call and Q is always cold, and the tiles of one
    # user start together and wait on HBM for the same K/V lines: prefetch a later tile's Q and one
    # K/V block to L2 (PREFETCH waves ahead), and keep streamed Q/O from evicting K/V (STREAM_QO)
    "m64_n64_w4_s3_pf1": {"PREFETCH": 1},
    "m64_n64_w4_s3_pf2": {"PREFETCH": 2},
    "m64_n64_w4_s3_pf4": {"PREFETCH": 4},
    "m64_n64_w4_s3_stream": {"STREAM_QO": True},
    "m64_n64_w4_s3_pf2_stream": {"PREFETCH": 2, "STREAM_QO": True},
    "m64_n64_w4_s3_p2_pf1": {"PERSISTENT": 2, "PREFETCH": 1},
    "m64_n64_w4_s3_p2_pf1_stream": {"PERSISTENT": 2, "PREFETCH": 1, "STREAM_QO": True},
    "m128_n64_w8_s2_r128_pf2": {"BLOCK_M": 128, "num_warps": 8, "num_stages": 2, "MAXNREG": 128, "PREFETCH": 2},
    # third sweep: the warp-specialised kernel on head-major Q (+ fix-up launch), run in its own process
    "ws_n64_s2": {"BLOCK_N": 64, "num_stages": 2, "WARP_SPECIALIZE": True},
    "ws_n64_s3": {"BLOCK_N": 64, "num_stages": 3, "WARP_SPECIALIZE": True},
    "ws_n128_s2": {"BLOCK_N": 128, "num_stages": 2, "WARP_SPECIALIZE": True},
    "m128_n64_w8_s2_r128_pf2_stream": {
        "BLOCK_M": 128,
        "num_warps": 8,
        "num_stages": 2,
        "MAXNREG": 128,
        "PREFETCH": 2,
        "STREAM_QO": True,
    },
    **GLUON,
}
SWEEPS = {  # --variants sweep1 | sweep2 (sweep: both)
    "sweep1": [n for n in VARIANTS if "_pf" not in n and "_stream" not in n and not n.startswith(("ws", "g_"))],
    "sweep2": [
        "m64_n64_w4_s3",
        "m64_n64_w4_s3_pf1",
        "m64_n64_w4_s3_pf2",
        "m64_n64_w4_s3_pf4",
        "m64_n64_w4_s3_stream",
        "m64_n64_w4_s3_pf2_stream",
        "m64_n64_w4_s3_p2",
        "m64_n64_w4_s3_p2_pf1",
        "m64_n64_w4_s3_p2_pf1_stream",
        "m128_n64_w8_s2_r128",
        "m128_n64_w8_s2_r128_pf2",
        "m128_n64_w8_s2_r128_pf2_stream",
        "m64_n64_w4_s3",  # again last: the run-to-run spread of the same configuration
    ],
    "final": ["m64_n64_w4_s3", "m128_n64_w8_s2_r128", "m64_n64_w4_s3", "m128_n64_w8_s2_r128"],
    "ws": ["ws_n64_s2", "ws_n64_s3"],
    "ws2": ["m128_n64_w8_s2_r128", "ws_n64_s2", "ws_n128_s2"],
    "gluon1": ["m128_n64_w8_s2_r128", *(n for n in GLUON if not n.endswith("_ds")), "m128_n64_w8_s2_r128"],
    "gluon1ds": ["m128_n64_w8_s2_r128", *(n for n in GLUON if not n.endswith("_ts")), "m128_n64_w8_s2_r128"],
    "final2": ["m128_n64_w8_s2_r128", "m64_n64_w4_s3", "m128_n64_w8_s2_r128", "m64_n64_w4_s3"],
}


def variant_list(which: str, kernel) -> list[tuple[str, dict]]:
    if which == "default":
        return [("default", dict(kernel.CONFIG))]
    names = list(VARIANTS) if which == "sweep" else SWEEPS.get(which, which.split(","))
    out = [(n, dict(BASE, **VARIANTS[n])) for n in names]
    if which.startswith("sweep") and all(cfg != dict(kernel.CONFIG) for _, cfg in out):
        out.insert(0, ("default", dict(kernel.CONFIG)))
    return out


def setup():
    spec = load_spec(REPO / "specs" / f"{NAME}.yaml")
    kernel = load_module(KERNELS / f"{NAME}.py", f"kb_{NAME}")
    (case,) = spec.cases("cuda")[:1]
    ref = load_module(spec.reference, f"ref_{NAME}", case.params)
    return spec, kernel, ref, case


def warm(which: str, shard: int, shards: int) -> None:
    """Compile this shard's share of the variants by running each once."""
    _, kernel, ref, _ = setup()
    inputs = make_inputs(ref, 0)
    for i, (name, cfg) in enumerate(variant_list(which, kernel)):
        if i % shards != shard:
            continue
        kernel.CONFIG.clear()
        kernel.CONFIG.update(cfg)
        try:
            kernel.ModelNew()(*inputs)
            torch.cuda.synchronize()
        except Exception as exc:
            print(f"warm: {name}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)


def kernel_times(model, inputs) -> tuple[float | None, dict]:
    """(device time of one forward: all its kernels, the Q copy of the WS path included; per kernel)."""
    times = kernel_breakdown(model, inputs)
    kernels = [
        v for k, v in times.items() if isinstance(v, float) and not k.startswith("aten::")
    ]  # ops repeat their kernels
    return (sum(kernels) or None), times


def baselines(ref, inputs, allow_compile: bool, deadline: float, flops: float) -> dict:
    model = ref.Model().cuda()
    q, k, v, uid = inputs
    out = {}
    with torch.no_grad():
        out["eager_broadcast_sdpa"] = bench(lambda: model(*inputs))
        kb, vb = k[uid], v[uid]
        out["sdpa_on_broadcast_kv"] = bench(lambda: F.scaled_dot_product_attention(q, kb, vb))
        del kb, vb
        # The same FLOPs as one dense attention per (user, head): each user's candidates' queries
        # stacked head-major (a copy, not timed), the library kernels on it: what attention reaches
        # at these sizes without the candidate-to-user indirection.
        users, heads, kv_len, dim = k.shape
        qd = q.view(users, -1, heads, q.shape[2], dim).transpose(1, 2).reshape(users, heads, -1, dim)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        for label, backend in (
            ("sdpa_dense_cudnn", SDPBackend.CUDNN_ATTENTION),
            ("sdpa_dense_flash", SDPBackend.FLASH_ATTENTION),
        ):
            try:
                with sdpa_kernel([backend]):
                    out[label] = bench(lambda: F.scaled_dot_product_attention(qd, k, v))
                    out[label + "_tflops"] = flops / out[label] / 1e9
            except Exception as exc:  # a backend may refuse the shape or be missing from the build
                out[label] = f"unavailable: {type(exc).__name__}"
        del qd
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        ms = bench(lambda: a @ a)
        out["matmul_8192_tflops"] = 2 * 8192**3 / ms / 1e9
        del a
        if allow_compile and time.time() < deadline - 40:
            compiled = torch.compile(model)
            t0 = time.time()
            compiled(*inputs)
            torch.cuda.synchronize()
            out["torch.compile"] = bench(lambda: compiled(*inputs))
            out["torch.compile_build_s"] = round(time.time() - t0, 1)
    return out


def run(which: str, allow_compile: bool, deadline: float) -> dict:
    spec, kernel, ref, case = setup()
    default = dict(kernel.CONFIG)
    tol = spec.tolerance(case.dtype)
    nbytes, flops = spec.roofline(Case(params=case.params, dtype=case.dtype))
    inputs = make_inputs(ref, 1)
    expected = fp32_reference(ref, inputs)
    fresh = make_inputs(ref, 2)
    expected_fresh = fp32_reference(ref, fresh)
    result = {"params": case.params, "flops": flops, "bytes": nbytes, "default_config": default, "variants": []}
    for name, cfg in variant_list(which, kernel):
        row = {"name": name if all(r["name"] != name for r in result["variants"]) else name + "_again", "config": cfg}
        if time.time() > deadline:
            row["skipped"] = "deadline"
            result["variants"].append(row)
            continue
        kernel.CONFIG.clear()
        kernel.CONFIG.update(cfg)
        try:
            model = kernel.ModelNew().cuda()
            with torch.no_grad():
                poison_allocator(expected.numel() * 2)
                row.update(check(model(*inputs), expected, tol))
                poison_allocator(expected.numel() * 2)
                second = check(model(*fresh), expected_fresh, tol)
                row["ok"] = row["ok"] and second["ok"]
                row["max_abs_err"] = max(row["max_abs_err"], second["max_abs_err"])
                if row["ok"]:
                    row["ms"] = bench(lambda: model(*inputs))
                    row["tflops"] = flops / row["ms"] / 1e9
                    row["kernel_us"], row["kernels_us"] = kernel_times(model, inputs)
                    if row["kernel_us"]:
                        row["kernel_tflops"] = flops / row["kernel_us"] / 1e6
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        result["variants"].append(row)
        print(
            f"{name}: ms={row.get('ms')} kernel_us={row.get('kernel_us')} ok={row.get('ok')} {row.get('error', '')}",
            flush=True,
        )
    kernel.CONFIG.clear()
    kernel.CONFIG.update(default)
    result["baselines_ms"] = baselines(ref, inputs, allow_compile, deadline, flops)
    return result


# Shapes for --check-hopper (C, U, H, Lkv, D, dtype, index): pairs of candidates with different users,
# an odd last candidate, unsorted indices, key lengths that are not a multiple of the key tile (one
# tile or several), head dim 64; run on 3 programs too, so that each walks several items.
HOPPER_CASES = [
    (37, 5, 2, 1024, 128, torch.bfloat16, "sorted_uneven"),
    (20, 7, 3, 1000, 64, torch.float16, "random"),
    (64, 2, 1, 96, 128, torch.bfloat16, "sorted_even"),
    (9, 4, 2, 64, 128, torch.bfloat16, "random"),
    (130, 3, 2, 520, 128, torch.bfloat16, "sorted_uneven"),
]


def probe(name: str) -> None:
    """One Gluon variant in this process: once at the spec shape, then on HOPPER_CASES (also on 3
    programs when persistent), a line printed before each launch so that a hang names its case."""
    spec, kernel, ref, case = setup()
    cfg = dict(BASE, **GLUON[name])
    inputs = make_inputs(ref, 1)
    expected = fp32_reference(ref, inputs)
    kernel.CONFIG.clear()
    kernel.CONFIG.update(cfg)
    print(f"LAUNCH {name} spec", flush=True)
    out = kernel.ModelNew()(*inputs)
    torch.cuda.synchronize()
    err = (out.float() - expected).abs().max().item()
    print(f"{'DONE' if err <= 0.02 else 'WRONG'} {name} spec max_abs_err={err:.4f}", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    bad = err > 0.02
    for cands, users, heads, kv_len, dim, dtype, how in HOPPER_CASES:
        if how == "random":
            uid = torch.randint(0, users, (cands,), device="cuda", generator=gen)
        elif how == "sorted_even":
            uid = torch.arange(cands, device="cuda") * users // cands
        else:
            uid = torch.randint(0, users, (cands,), device="cuda", generator=gen).sort().values
        q = torch.randn(cands, heads, 64, dim, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(users, heads, kv_len, dim, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(users, heads, kv_len, dim, device="cuda", dtype=dtype, generator=gen)
        s = torch.einsum("chqd,chkd->chqk", q.float(), k[uid].float()) / dim**0.5
        want = torch.einsum("chqk,chkd->chqd", s.softmax(-1), v[uid].float())
        for programs in (0, 3) if cfg["HOPPER_PERSISTENT"] else (0,):
            kernel.CONFIG["HOPPER_PROGRAMS"] = programs
            label = f"C{cands} U{users} H{heads} L{kv_len} D{dim} {str(dtype)[6:]} {how} programs={programs or 'all'}"
            print(f"LAUNCH {name} {label}", flush=True)
            poison_allocator(want.numel() * 2)
            got = kernel.ikbo_target_attention(q, k, v, uid)
            torch.cuda.synchronize()
            err = (got.float() - want).abs().max().item()
            bad |= not err <= 0.02
            print(f"{'DONE' if err <= 0.02 else 'WRONG'} {name} {label} max_abs_err={err:.4f}", flush=True)
    print(f"{'FAIL' if bad else 'PASS'} {name}", flush=True)


def check_hopper(out_dir: Path, variants: list[str] | None = None, shard: str = "0/1") -> None:
    """Every GLUON variant (and 3-program persistent runs) against the fp32 computation on HOPPER_CASES."""
    kernel = load_module(KERNELS / f"{NAME}.py", f"kb_{NAME}_check")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for cands, users, heads, kv_len, dim, dtype, how in HOPPER_CASES:
        if how == "random":
            uid = torch.randint(0, users, (cands,), device="cuda", generator=gen)
        elif how == "sorted_even":
            uid = torch.arange(cands, device="cuda") * users // cands
        else:
            uid = torch.randint(0, users, (cands,), device="cuda", generator=gen).sort().values
        q = torch.randn(cands, heads, 64, dim, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(users, heads, kv_len, dim, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(users, heads, kv_len, dim, device="cuda", dtype=dtype, generator=gen)
        s = torch.einsum("chqd,chkd->chqk", q.float(), k[uid].float()) / dim**0.5
        expected = torch.einsum("chqk,chkd->chqd", s.softmax(-1), v[uid].float())
        index, shards = (int(x) for x in shard.split("/"))
        for i, (name, cfg) in enumerate(GLUON.items()):
            if (variants and name not in variants) or i % shards != index:
                continue
            for programs in (0, 3):
                if programs and not cfg["HOPPER_PERSISTENT"]:
                    continue
                kernel.CONFIG.clear()
                kernel.CONFIG.update(dict(BASE, **cfg, HOPPER_PROGRAMS=programs))
                row = {
                    "case": [cands, users, heads, kv_len, dim, str(dtype), how],
                    "variant": name,
                    "programs": programs,
                }
                try:
                    poison_allocator(expected.numel() * 2)
                    out = kernel.ikbo_target_attention(q, k, v, uid)
                    torch.cuda.synchronize()
                    err = (out.float() - expected).abs().max().item()
                    row.update(max_abs_err=err, ok=bool(err <= 0.02))  # the spec's atol
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                rows.append(row)
                print(row, flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if shard == "0/1" else "_" + shard.replace("/", "of")
    (out_dir / f"ikbo_hopper_check{suffix}.json").write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not r.get("ok")]
    print(f"check-hopper: {len(rows) - len(bad)} of {len(rows)} correct", flush=True)


def table(result: dict) -> str:
    lines = [
        "| variant | ok | do_bench ms | TFLOP/s | kernel us (profiler) | TFLOP/s | config |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["variants"]:
        cells = [
            r["name"],
            str(r.get("ok", "-")),
            f"{r['ms']:.4f}" if "ms" in r else r.get("error", r.get("skipped", "-"))[:60],
            f"{r['tflops']:.0f}" if "tflops" in r else "-",
            f"{r['kernel_us']:.1f}" if r.get("kernel_us") else "-",
            f"{r['kernel_tflops']:.0f}" if "kernel_tflops" in r else "-",
            ", ".join(f"{k}={v}" for k, v in r["config"].items() if BASE.get(k) != v),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    base = ", ".join(f"{k} {v:.3f}" for k, v in result["baselines_ms"].items() if isinstance(v, float))
    return "\n".join(lines) + "\n\nbaselines: " + base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--variants", default="sweep", help="sweep, sweep1, sweep2, default, or names from VARIANTS")
    parser.add_argument("--deadline-s", type=float, default=140.0, help="start no new variant after this")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    parser.add_argument("--warm-workers", type=int, default=12)
    parser.add_argument("--check-hopper", action="store_true", help="only check the Gluon variants on odd shapes")
    parser.add_argument("--probe", default=None, help="one GLUON variant: spec shape then HOPPER_CASES, progress lines")
    parser.add_argument("--check-shard", default="0/1", help="i/n: this process checks every n-th variant from i")
    parser.add_argument("--warm-shard", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_shard is not None:
        shard, shards = (int(x) for x in args.warm_shard.split("/"))
        warm(args.variants, shard, shards)
        return
    if args.probe:
        probe(args.probe)
        return
    if args.check_hopper:
        names = None if args.variants in ("sweep", "gluon1") else SWEEPS.get(args.variants, args.variants.split(","))
        check_hopper(Path(args.out), names, args.check_shard)
        return
    start = time.time()
    deadline = start + args.deadline_s
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cmd = [sys.executable, __file__, "--variants", args.variants]
    workers = [subprocess.Popen(cmd + ["--warm-shard", f"{i}/{args.warm_workers}"]) for i in range(args.warm_workers)]
    for proc in workers:
        try:
            proc.wait(timeout=max(1.0, min(90.0, deadline - 40 - time.time())))
        except subprocess.TimeoutExpired:
            proc.kill()
    env = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "warm_compile_s": round(time.time() - start, 1),
        "command": " ".join(sys.argv),
    }
    result = run(args.variants, not args.no_compile, deadline)
    env["total_s"] = round(time.time() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ikbo_bench.json").write_text(json.dumps({"environment": env, "result": result}, indent=1))
    print(json.dumps(env))
    print(table(result))


if __name__ == "__main__":
    main()
