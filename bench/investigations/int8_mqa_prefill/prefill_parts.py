"""Where the int8 MQA prefill's time goes against its baseline, at the spec's shapes (B32 S1024, 16 query heads
on one int8 KV head): the operator's two launches (the dequantising prepass, then the Gluon attention) and the
baseline's two (torch.compile's dequantisation, then SDPA), each timed alone and whole, in one process.

    python bench/investigations/int8_mqa_prefill/prefill_parts.py --out FILE.json [--rounds 5]

Times are do_bench medians (L2 flushed), the minimum over rounds beside the median of the rounds' medians.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    kernel = load_module(KERNELS / "int8_mqa_prefill.py", "int8_mqa_prefill")
    ref = load_module(REPO / "specs" / "int8_mqa_prefill.py", "ref_prefill")
    import _flash_hopper as hopper

    torch.manual_seed(0)
    b, h, s, d = 32, 16, 1024, 128
    q = torch.randn(b, h, s, d, device="cuda").to(torch.bfloat16)
    kc, ks = ref.quantize(torch.randn(b, s, d, device="cuda"))
    vc, vs = ref.quantize(torch.randn(b, s, d, device="cuda"))
    ks, vs = ks.to(torch.bfloat16), vs.to(torch.bfloat16)  # the spec's dtype for every float input
    k = ref.dequantize(kc, ks, torch.bfloat16)
    v = ref.dequantize(vc, vs, torch.bfloat16)
    out = torch.empty_like(q)
    config = hopper.hopper_config(kernel.CONFIG)

    def dequant_both():
        return ref.dequantize(kc, ks, q.dtype), ref.dequantize(vc, vs, q.dtype)

    compiled_dequant = torch.compile(dequant_both)
    results = []
    for causal in (True, False):
        model = kernel.ModelNew(causal)
        baseline = torch.compile(ref.Model(causal))
        parts = {
            "operator": lambda: model(q, kc, ks, vc, vs),
            "operator attention only (Gluon, dequantised K/V given)": lambda: hopper.attention(
                q, k, v, out, causal, config
            ),
            "baseline (torch.compile of the reference)": lambda: baseline(q, kc, ks, vc, vs),
            "baseline dequantisation only (torch.compile)": compiled_dequant,
            "baseline SDPA only (dequantised K/V given)": lambda: F.scaled_dot_product_attention(
                q, k.unsqueeze(1), v.unsqueeze(1), is_causal=causal, enable_gqa=True
            ),
        }
        with torch.no_grad():
            for fn in parts.values():
                fn()
            series = {name: [] for name in parts}
            for _ in range(args.rounds):
                for name, fn in parts.items():
                    series[name].append(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))
        entry = dict(
            causal=causal,
            ms={
                name: dict(
                    median=round(statistics.median(xs), 5), min=round(min(xs), 5), runs=[round(x, 5) for x in xs]
                )
                for name, xs in series.items()
            },
        )
        ms = {name: v["min"] for name, v in entry["ms"].items()}
        entry["prepass_ms_by_difference"] = round(
            ms["operator"] - ms["operator attention only (Gluon, dequantised K/V given)"], 5
        )
        entry["baseline_dequant_ms_by_difference"] = round(
            ms["baseline (torch.compile of the reference)"] - ms["baseline SDPA only (dequantised K/V given)"], 5
        )
        entry["x_baseline_min"] = round(ms["baseline (torch.compile of the reference)"] / ms["operator"], 4)
        print(
            json.dumps(dict(causal=causal, min_ms=ms, **{k: entry[k] for k in entry if k.endswith("difference")})),
            flush=True,
        )
        results.append(entry)
    Path(args.out).write_text(json.dumps(dict(device=torch.cuda.get_device_name(), results=results), indent=1))


if __name__ == "__main__":
    main()
