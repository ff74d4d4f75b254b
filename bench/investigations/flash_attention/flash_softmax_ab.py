"""A/B of the Gluon flash kernel's softmax variants at the int8 prefill's and flash attention's spec shapes, in
one process, rounds interleaved so that clock and machine drift hit every variant alike. A variant is
NAME:KEY=VALUE,KEY=VALUE (hopper_config keys over the kernel file's: LAZY, SCHEDULE, PERSISTENT, ...);
variants are separated by ";". --head times another copy of _flash_hopper.py beside them: a self-contained one,
as trees up to 4a79c16 had (later ones import _flash_hopper_ws / _flash_hopper_softmax by name, which would
resolve to this tree's).

    python bench/investigations/flash_attention/flash_softmax_ab.py --out FILE.json [--variants "eager:LAZY=0;lazy:LAZY=1"] [--rounds 5]

Per shape: each variant's output checked against float32 SDPA, on the spec's random inputs and on inputs
whose key norms grow 16-fold along the sequence (row maxima that keep rising, so that the lazy rescale
must rescale, at different tiles for different rows); then per round every variant and cuDNN's SDPA timed
by do_bench (median, L2 flushed). The kernel is called
as the operator calls it after its prepass (_flash_hopper.attention with the kernel file's CONFIG), so the
int8 prefill's numbers here leave out its dequantising prepass (the same for every variant).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, load_module  # noqa: E402

SHAPES = {  # op: (batch, query heads, kv heads, seq, head dim), the kernel file whose CONFIG is used
    "prefill": ((32, 16, 1, 1024, 128), "int8_mqa_prefill"),
    "flash": ((4, 32, 32, 4096, 128), "flash_attention"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--variants", default="eager:LAZY=0;lazy:LAZY=1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", default="prefill,flash")
    parser.add_argument("--batches", default=None, help="batch sizes to run instead of the spec's (e.g. 32,33)")
    parser.add_argument("--masks", default="causal,full")
    parser.add_argument(
        "--head",
        type=Path,
        default=None,
        help="a self-contained copy of _flash_hopper.py (trees up to 4a79c16), timed as variant 'head'",
    )
    args = parser.parse_args()
    import _flash_hopper as hopper

    variants = {}
    kernels = {}
    if args.head is not None:
        variants["head"] = {}
        kernels["head"] = load_module(args.head, "_flash_hopper_head")
    for item in args.variants.split(";"):
        name, _, settings = item.partition(":")
        variants[name] = {}
        for pair in filter(None, settings.split(",")):
            key, value = pair.split("=")
            variants[name][key] = int(value) if value.lstrip("-").isdigit() else value
    results = []
    for op, batch in [(op, b) for op in args.ops.split(",") for b in (args.batches or "0").split(",")]:
        (b, hq, hkv, s, d), name = SHAPES[op]
        b = int(batch) or b
        kernel = load_module(KERNELS / f"{name}.py", name)
        base = hopper.hopper_config(dict(kernel.CONFIG, IMPL="gluon"))
        for causal in [m == "causal" for m in args.masks.split(",")]:
            torch.manual_seed(0)
            q = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
            ref = F.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=hkv != hq
            )
            grow = (1 + 15 * torch.arange(s, device="cuda") / s)[:, None].to(torch.bfloat16)
            k_grow = k * grow
            ref_grow = F.scaled_dot_product_attention(
                q.float(), k_grow.float(), v.float(), is_causal=causal, enable_gqa=hkv != hq
            )
            outs = {p: torch.full_like(q, float("nan")) for p in variants}
            calls = {
                p: (
                    lambda p=p, kk=k: kernels.get(p, hopper).attention(
                        q, kk, v, outs[p], causal, dict(base, **variants[p])
                    )
                )
                for p in variants
            }
            entry = dict(
                op=op, causal=causal, shape=[b, hq, hkv, s, d], config=base, variants=variants, checks={}, ms={}
            )
            for p in variants:
                entry["checks"][p] = {}
                for what, kk, r in (("random", k, ref), ("growing keys", k_grow, ref_grow)):
                    outs[p].fill_(float("nan"))
                    calls[p](kk=kk)
                    torch.cuda.synchronize()
                    diff = (outs[p].float() - r).abs()
                    ok = bool(torch.isfinite(outs[p]).all()) and bool((diff <= 0.02 + 0.02 * r.abs()).all())
                    entry["checks"][p][what] = dict(ok=ok, max_err=float(diff.max()), mean_err=float(diff.mean()))
            del k_grow, ref_grow
            sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != hq)  # noqa: E731
            timed = {p: calls[p] for p in variants if all(c["ok"] for c in entry["checks"][p].values())}
            series: dict = {str(p): [] for p in timed}
            series["cudnn"] = []
            for _ in range(args.rounds):
                for p, fn in timed.items():
                    series[str(p)].append(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    series["cudnn"].append(triton.testing.do_bench(sdpa, warmup=25, rep=200, return_mode="median"))
            flops = 4 * b * hq * s * s * d * (0.5 if causal else 1.0)
            for key, xs in series.items():
                med = statistics.median(xs)
                entry["ms"][key] = dict(
                    median=round(med, 5), runs=[round(x, 5) for x in xs], tflops=round(flops / med / 1e9, 1)
                )
            cudnn = entry["ms"]["cudnn"]["median"]
            entry["x_cudnn"] = {key: round(cudnn / v["median"], 4) for key, v in entry["ms"].items() if key != "cudnn"}
            print(json.dumps({k: entry[k] for k in ("op", "causal", "checks", "x_cudnn")}), flush=True)
            results.append(entry)
            del q, k, v, ref, outs
            torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(dict(device=torch.cuda.get_device_name(), results=results), indent=1))


if __name__ == "__main__":
    main()
