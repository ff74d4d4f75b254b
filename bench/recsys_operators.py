"""Benchmark the recommendation-model reference kernels (issue 16) against their baselines, with a
CONFIG sweep, in one run.

For each kernel (conv1d, optimized_fm, pffn, mbdt), at its spec's production shapes and dtypes:
check ModelNew against a float64 reference (torch.empty & co. poisoned), then time with
triton.testing.do_bench (median, L2 flushed): the kernel at its default CONFIG, the eager
reference, torch.compile of it (not for conv1d, whose baseline is F.conv1d itself), and the
kernel's other baselines (conv1d: the channels_last conv2d trick of specs/conv1d_conv2d.py, on
the same inputs and parameters). Then every CONFIG variant in VARIANTS, correctness-checked and
timed, so one GPU run can pick better defaults. Each case's JSON is written as soon as it is done
(OUT/cases/), the summary JSON and a markdown table after every case (OUT/recsys_operators.*).

    python bench/recsys_operators.py --out OUTDIR [--only conv1d pffn] [--budget-s 200] [--no-sweep]
    python bench/recsys_operators.py --out /tmp/smoke --device interpret   # CPU: interpreter shapes, untimed

--device interpret checks the default and every variant at the specs' interpreter shapes (no
timing), so a typo in a variant costs no GPU time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# kernel -> its spec, then specs whose reference is a further baseline for the same inputs.
OPERATORS = {
    "conv1d": ["conv1d", "conv1d_conv2d"],
    "optimized_fm": ["optimized_fm"],
    "pffn": ["pffn"],
    "mbdt": ["mbdt"],
}
# Shapes measured besides the spec's own (GPU only): the published MTIA shapes of MBDT.
EXTRA_SHAPES = {"mbdt": [{"BATCH": 64, "FEATURES": 2, "BORDERS": 2}]}
# CONFIG changes timed against the default, each alone (values from the kernel's TUNABLES).
VARIANTS = {
    "conv1d": [
        {"BLOCK_L": 128},
        {"fp32_BLOCK_L": 256},
        {"fp32_BLOCK_L": 64},
        {"num_stages": 2},
        {"num_stages": 4},
        {"num_warps": 4},
        {"fp32_precision": "tf32x3"},
        {"BLOCK_CI": 64},
        {"BLOCK_CI": 16},
    ],
    "optimized_fm": [
        {"k_major": True},
        {"k_major": True, "BLOCK_K": 64},
        {"k_major": True, "num_warps": 8},
        {"k_major": True, "BLOCK_K": 256, "num_warps": 8},
        {"k_major": True, "BLOCK_D": 32},
        {"BLOCK_K": 64},
        {"BLOCK_K": 256},
        {"BLOCK_D": 128},
        {"BLOCK_D": 32},
        {"num_stages": 2},
        {"num_warps": 8},
        {"num_warps": 2},
        {"BLOCK_K": 64, "num_stages": 2},
        {"BLOCK_D": 128, "num_warps": 8},
        {"BLOCK_K": 256, "BLOCK_D": 32},
    ],
    "pffn": [
        {"BLOCK_KC": 64},
        {"BLOCK_KC": 16},
        {"BLOCK_M": 128},
        {"BLOCK_M": 32},
        {"num_warps": 4},
        {"num_stages": 3},
        {"num_stages": 1},
        {"BLOCK_M": 128, "BLOCK_KC": 16},
        {"BLOCK_M": 32, "num_warps": 4},
        {"BLOCK_KC": 64, "num_stages": 1},
    ],
    "mbdt": [
        {"tile_borders": False},
        {"search": "linear"},
        {"BLOCK_B": 64},
        {"BLOCK_B": 16},
        {"BLOCK_F": 64},
        {"BLOCK_F": 256},
        {"num_warps": 4},
        {"BLOCK_B": 64, "BLOCK_F": 64},
        {"BLOCK_B": 8, "BLOCK_F": 256},
    ],
}
# Sweep only the first SWEEP_SHAPES shapes of each spec (each dtype): the production ones come first.
SWEEP_SHAPES = {"conv1d": 1, "optimized_fm": 3, "pffn": 2, "mbdt": 2}


def shape_text(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def kernel_call(rk, new, inputs, refs, tol, timed: bool, rep_ms: float) -> dict:
    """Correctness of one call under poisoned allocations, then its median time (GPU only); a
    configuration that does not compile or launch (out of shared memory, say) is a failed entry."""
    try:
        return _kernel_call(rk, new, inputs, refs, tol, timed, rep_ms)
    except Exception as exc:
        return {
            "ok": False,
            "ms": None,
            "message": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
        }


def _kernel_call(rk, new, inputs, refs, tol, timed, rep_ms) -> dict:
    import torch

    with torch.no_grad():
        with rk.poisoned_allocations():
            outs = rk.as_list(new(*inputs))
        rk.sync()
        entry = rk.compare(outs, refs, tol)
        del outs
        entry["ms"] = rk.bench(lambda: new(*inputs), warmup_ms=rep_ms / 4, rep_ms=rep_ms) if timed else None
    return entry


def run_case(rk, name, specs, case, seed, timed, sweep, deadline) -> dict:
    """One case: correctness and times of the default, the baselines, then the sweep (if `sweep`)."""
    import torch

    spec = specs[0]
    ref = rk.load_module(spec.reference, f"ref_{name}", case.params)
    kernel = rk.load_module(REPO / "knowledge_base" / "kernels" / f"{name}.py", f"kernel_{name}")
    dtype = rk.DTYPES.get(case.dtype)
    tol = spec.tolerance(case.dtype).model_dump()
    row = {"kernel": name, "spec": spec.name, "shape": case.params, "dtype": case.dtype, "config": dict(kernel.CONFIG)}
    nbytes, flops = spec.roofline(case)
    row.update(bytes=nbytes, flops=flops)
    model, new, inputs = rk.build(ref, kernel, dtype, seed)
    with torch.no_grad():
        refs = rk.reference_outputs(model, inputs)
    row["default"] = kernel_call(rk, new, inputs, refs, tol, timed, 100)
    baselines = {}
    if timed:
        with torch.no_grad():
            baselines["eager"] = rk.bench(lambda: model(*inputs))
            if spec.baseline == "torch.compile":
                torch._dynamo.reset()
                compiled = torch.compile(model, dynamic=False)
                t0 = time.time()
                compiled(*inputs)
                row["compile_s"] = time.time() - t0
                baselines["torch.compile"] = rk.bench(lambda: compiled(*inputs))
    for other in specs[1:]:  # same constructor and draws, so the same parameters
        other_ref = rk.load_module(other.reference, f"ref_{other.name}", case.params)
        other_model, _, _ = rk.build(other_ref, kernel, dtype, seed)
        with torch.no_grad():
            agree = rk.compare(rk.as_list(other_model(*inputs)), refs, tol)
            baselines[other.name] = rk.bench(lambda: other_model(*inputs)) if timed else None
        row[f"{other.name}_agrees"] = agree["ok"]
    row["baselines_ms"] = baselines
    row["variants"] = []
    default_cfg = dict(kernel.CONFIG)
    for variant in VARIANTS.get(name, []) if sweep else []:
        if time.time() > deadline:
            row["sweep_cut_short"] = True
            break
        kernel.CONFIG.clear()
        kernel.CONFIG.update(default_cfg, **variant)
        entry = kernel_call(rk, new, inputs, refs, tol, timed, 30)
        row["variants"].append({"variant": variant, **entry})
    kernel.CONFIG.clear()
    kernel.CONFIG.update(default_cfg)
    ms = row["default"]["ms"]
    if ms or timed:
        row["speedups"] = {b: t / ms for b, t in baselines.items() if t and ms}
        row["gbps"] = nbytes / ms / 1e6 if nbytes and ms else None
        row["tflops"] = flops / ms / 1e9 if flops and ms else None
        good = [v for v in row["variants"] if v.get("ok") and v.get("ms")]
        best = min(good, key=lambda v: v["ms"], default=None)
        if best and (not ms or best["ms"] < ms):
            row["best_variant"] = {
                "variant": best["variant"],
                "ms": best["ms"],
                "speedups": {b: t / best["ms"] for b, t in baselines.items() if t},
            }
    return row


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [
        f"# Recommendation-model operators on {env['device']}",
        "",
        f"torch {env['torch']}, triton {env['triton']}; medians of triton.testing.do_bench (L2 flushed)."
        + (
            f" Copy ceiling measured in the same run: {report['peaks']['copy_gbps']:.0f} GB/s, bf16 matmul "
            f"{report['peaks']['matmul_tflops']:.0f} TFLOP/s."
            if report.get("peaks")
            else ""
        ),
        "",
        "| kernel | shape | dtype | ok | kernel ms | GB/s | TFLOP/s | baselines ms | speedups | best variant |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for r in report["results"]:
        if "error" in r:
            lines.append(
                f"| {r['kernel']} | {shape_text(r['shape'])} | {r['dtype']} | ERROR: {r['error'][:100]} | | | | | | |"
            )
            continue
        d = r["default"]
        fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        base = ", ".join(f"{k} {fmt(v, '.4f')}" for k, v in r["baselines_ms"].items())
        speed = ", ".join(f"{k} {v:.2f}x" for k, v in r.get("speedups", {}).items())
        best = r.get("best_variant")
        best_txt = (
            (
                f"`{json.dumps(best['variant'])}` {best['ms']:.4f} ms ("
                + ", ".join(f"{k} {v:.2f}x" for k, v in best["speedups"].items())
                + ")"
            )
            if best
            else "-"
        )
        bad = [v for v in r["variants"] if not v.get("ok")]
        ok = ("yes" if d["ok"] else "NO " + d.get("message", "")[:60]) + (
            f"; {len(bad)} variants failed" if bad else ""
        )
        lines.append(
            f"| {r['kernel']} | {shape_text(r['shape'])} | {r['dtype']} | {ok} | {fmt(d['ms'], '.4f')} | "
            f"{fmt(r.get('gbps'), '.0f')} | {fmt(r.get('tflops'), '.1f')} | {base} | {speed or '-'} | {best_txt} |"
        )
    lines += ["", "## Variants: geometric mean of default ms / variant ms over each kernel's timed cases", ""]
    for name, ranking in report.get("variant_ranking", {}).items():
        lines.append(f"- {name}: " + "; ".join(f"`{json.dumps(v)}` {g:.3f} ({n} cases)" for v, g, n in ranking[:6]))
    return "\n".join(lines) + "\n"


def variant_ranking(results: list[dict]) -> dict:
    """Per kernel, variants by geometric-mean speed relative to the default (correct cases only)."""
    out = {}
    for name in OPERATORS:
        ratios: dict[str, list[float]] = {}
        for r in results:
            if r.get("kernel") != name or "error" in r or not r["default"].get("ms"):
                continue
            for v in r["variants"]:
                key = json.dumps(v["variant"])
                ratios.setdefault(key, []).append(r["default"]["ms"] / v["ms"] if v.get("ok") and v.get("ms") else 0.0)
        ranked = [
            (json.loads(k), math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs)), len(xs))
            for k, xs in ratios.items()
        ]
        out[name] = sorted(ranked, key=lambda t: -t[1])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the JSON and markdown results")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=list(OPERATORS), help="kernels to run")
    parser.add_argument("--device", choices=["cuda", "interpret"], default="cuda")
    parser.add_argument("--no-sweep", action="store_true", help="time the default CONFIG only")
    parser.add_argument("--budget-s", type=float, default=1e9, help="no new variant is started after this many seconds")
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args(argv)
    interpret = args.device == "interpret"
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    if not interpret and not torch.cuda.is_available():
        print(
            "bench/recsys_operators.py: no CUDA GPU here; use --device interpret for a CPU check (untimed)",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(REPO / "bench"))
    import reference_kernels as rk
    import triton

    from kernelevolve.spec import Case, load_spec

    if interpret:
        from kernelevolve.evaluation.interpreter_compat import patch_triton_interpreter

        patch_triton_interpreter()
        rk.DEVICE = "cpu"
    start = time.time()
    deadline = start + args.budget_s
    (args.out / "cases").mkdir(parents=True, exist_ok=True)
    report = {
        "environment": {
            "device": "Triton interpreter (CPU, untimed)" if interpret else torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "command": " ".join(sys.argv),
        },
        "peaks": None if interpret else rk.peaks(),
        "results": [],
    }

    def save():
        report["variant_ranking"] = variant_ranking(report["results"])
        (args.out / "recsys_operators.json").write_text(json.dumps(report, indent=1, default=str))
        (args.out / "recsys_operators.md").write_text(markdown(report))

    for name in args.only or list(OPERATORS):
        specs = [load_spec(REPO / "specs" / f"{s}.yaml") for s in OPERATORS[name]]
        cases = specs[0].cases("interpret" if interpret else "cuda")
        if not interpret:
            cases += [Case(params=p, dtype=d) for p in EXTRA_SHAPES.get(name, []) for d in specs[0].dtypes]
        for i, case in enumerate(cases):
            try:
                shape_index = list(dict.fromkeys(shape_text(c.params) for c in cases)).index(shape_text(case.params))
                sweep = not args.no_sweep and (interpret or shape_index < SWEEP_SHAPES.get(name, len(cases)))
                row = run_case(rk, name, specs, case, args.seed, not interpret, sweep, deadline)
                d = row["default"]
                print(
                    f"{name:13s} {shape_text(case.params):40s} {case.dtype:9s} {'ok' if d['ok'] else 'WRONG'} "
                    f"{d['ms'] if d['ms'] is None else round(d['ms'], 4)} ms; baselines {row['baselines_ms']}; "
                    f"variants failed: {sum(not v.get('ok') for v in row['variants'])}/{len(row['variants'])}",
                    flush=True,
                )
            except Exception as exc:  # one bad case must not lose the others
                traceback.print_exc()
                row = {
                    "kernel": name,
                    "shape": case.params,
                    "dtype": case.dtype,
                    "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                }
            (args.out / "cases" / f"{name}_{i}.json").write_text(json.dumps(row, indent=1, default=str))
            report["results"].append(row)
            rk.free_cache()
            save()
    report["environment"]["wall_s"] = time.time() - start
    save()
    print(markdown(report))
    ok = all(
        "error" not in r and r["default"]["ok"] and all(v.get("ok") for v in r["variants"]) for r in report["results"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
