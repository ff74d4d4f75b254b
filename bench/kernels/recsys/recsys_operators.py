"""Benchmark the recommendation-model reference kernels against their baselines, with a
CONFIG sweep, in one run.

For each kernel (conv1d, optimized_fm, pffn, mbdt), at its spec's production shapes and dtypes:
check ModelNew against a float64 reference (torch.empty & co. poisoned), then time with
triton.testing.do_bench (median, L2 flushed): the kernel at its default CONFIG, the eager
reference, torch.compile of it (not for conv1d, whose baseline is F.conv1d itself), and the
kernel's other baselines (conv1d: the channels_last conv2d trick of specs/conv1d_conv2d.py, on
the same inputs and parameters). Then every CONFIG variant in VARIANTS, correctness-checked and
timed, so one GPU run can pick better defaults. Each case's JSON is written as soon as it is done
(OUT/cases/), the summary JSON and a markdown table after every case (OUT/recsys_operators.*).

    python bench/kernels/recsys/recsys_operators.py --out OUTDIR [--only conv1d pffn] [--budget-s 200] [--no-sweep]
    python bench/kernels/recsys/recsys_operators.py --out /tmp/smoke --device interpret   # CPU: interpreter shapes, untimed
    # one process per kernel (a CUDA error in one cannot end the others), then one report:
    python bench/kernels/recsys/recsys_operators.py --out OUT --only conv1d --stem conv1d --no-cases --no-markdown
    python bench/kernels/recsys/recsys_operators.py --out OUT --summarize OUT/conv1d.json OUT/pffn.json

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

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]
from benchlib import KERNELS, REPO, load_module  # noqa: E402

# kernel -> its spec, then specs whose reference is a further baseline for the same inputs.
OPERATORS = {
    "conv1d": ["conv1d", "conv1d_conv2d"],
    "optimized_fm": ["optimized_fm"],
    "pffn": ["pffn"],
    "mbdt": ["mbdt"],
}
# Shapes measured besides the spec's own (GPU only): the published MTIA shapes of MBDT.
EXTRA_SHAPES = {"mbdt": [{"BATCH": 64, "FEATURES": 2, "BORDERS": 2}]}
# CONFIG changes timed against the default, each alone (values from the kernel's TUNABLES), the most
# promising first (a sweep cut short by its budget keeps those). The sweeps in
# bench/results/recsys/h200/2026-11-23_conv1d_fm_restructured/ chose conv1d's gather (FP16) / pairs (FP32) and optimized_fm's
# split_n; these sweep around them, each kernel's previous default included for comparison.
VARIANTS = {
    "conv1d": [
        # FP32 at 1.50x of a 1.7x target: the FP32 pairs kernel compiled for
        # sm_90a has one program per SM (255 registers, 112 KiB of shared memory), one stage (its
        # x loads wait at the top of every CIN slice) and every one of its 18 dots per slice
        # waited on. These variants tile the rows end to end (fp32_flat: no columns padded past
        # L = 200) and shrink the tile and slice until two or three programs fit on an SM with
        # pipelined loads (registers / shared memory per program compiled offline: L 128 CI 16
        # 2 stages: 124 / 88 KiB; L 64 CI 16: 76 / 68 KiB), and try the four-phase "quads".
        {"fp32_flat": True},
        {"fp32_flat": True, "fp32_BLOCK_L": 128},
        {"fp32_flat": True, "fp32_BLOCK_L": 128, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        {"fp32_flat": True, "fp32_BLOCK_L": 128, "fp32_BLOCK_CI": 16, "fp32_num_stages": 3},
        {"fp32_flat": True, "fp32_BLOCK_L": 64, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        {"fp32_flat": True, "fp32_BLOCK_L": 64, "fp32_BLOCK_CI": 16, "fp32_num_stages": 3},
        {"fp32_flat": True, "fp32_BLOCK_L": 64, "fp32_BLOCK_CI": 32, "fp32_num_stages": 2},
        {"fp32_flat": True, "fp32_BLOCK_CI": 16},
        {"fp32_flat": True, "fp32_BLOCK_L": 128, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2, "fp32_num_warps": 4},
        {"fp32_BLOCK_L": 128, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        {"fp32_shift": "quads", "fp32_flat": True, "fp32_BLOCK_L": 128, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        {"fp32_shift": "quads", "fp32_flat": True, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        # Shifted loads over flat tiles: 9 dots of the whole tile width per CIN slice (pairs: 18 of half).
        {"fp32_shift": "load", "fp32_flat": True, "fp32_BLOCK_L": 128, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        # The same capped at 128 registers (139 uncapped; compiled for sm_90a: no spills, 80 KiB of
        # shared memory): two programs per SM.
        {
            "fp32_shift": "load",
            "fp32_flat": True,
            "fp32_BLOCK_L": 128,
            "fp32_BLOCK_CI": 16,
            "fp32_num_stages": 2,
            "fp32_maxnreg": 128,
        },
        {"fp32_shift": "load", "fp32_flat": True, "fp32_BLOCK_CI": 16, "fp32_num_stages": 2},
        {"fp32_shift": "load", "fp32_flat": True, "fp32_BLOCK_L": 64, "fp32_BLOCK_CI": 32, "fp32_num_stages": 2},
    ],
    "optimized_fm": [
        {"BLOCK_D": 16},
        {"num_stages": 4},
        {"num_stages": 2},
        {"BLOCK_K": 128, "num_warps": 8},
        {"num_warps": 8},
        {"split_n": False, "BLOCK_D": 64},
    ],
    "pffn": [
        # B = 256 at 1.38x of a 2x target: the fused kernel's 64-row tiles
        # re-read W1[b] and W2[b] (160 KB) from L2 four times per sample; 128-row tiles (8 warps)
        # halve that. Compiled for sm_90a: BLOCK_M 128 / 8 warps 230 registers, 128 KiB shared
        # memory (one program per SM); 64 rows / 8 warps 151 registers.
        {"BLOCK_M": 128, "num_warps": 8},
        {"BLOCK_M": 128, "num_warps": 8, "num_stages": 1},
        {"BLOCK_M": 128, "num_warps": 8, "BLOCK_KC": 16, "num_stages": 3},
        {"BLOCK_M": 128, "num_warps": 8, "BLOCK_KC": 64},
        {"num_warps": 8},
        {"BLOCK_KC": 16, "num_stages": 3},
        {"BLOCK_KC": 64, "num_warps": 8},
        {"num_stages": 3},
        {"split_min_batch": 128},
    ],
    "mbdt": [
        {"row_blocks": 2},
        {"row_blocks": 4},
        {"row_blocks": 2, "num_warps": 16},
        {"row_blocks": 4, "BLOCK_B": 32},
        {"row_blocks": 8, "BLOCK_B": 32},
        {"linear_max_borders": 16},
        {"linear_max_borders": 16, "row_blocks": 4},
        {"linear_max_borders": 4},
        {"row_blocks": 8},
        {"row_blocks": 16},
        {"row_blocks": 4, "BLOCK_B": 128},
        {"row_blocks": 4, "num_warps": 4},
        {"row_blocks": 4, "BLOCK_F": 128},
        {"row_blocks": 4, "BLOCK_F": 32},
        {"BLOCK_B": 128},
        {"num_warps": 16},
        {"num_warps": 4},
    ],
}
# Sweep only the first SWEEP_SHAPES shapes of each spec (each dtype): the production ones come first.
SWEEP_SHAPES = {"conv1d": 4, "optimized_fm": 3, "pffn": 6, "mbdt": 3}


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


def run_case(rk, name, specs, case, seed, timed, keep) -> tuple[dict, tuple | None]:
    """One case: correctness and times of the default and the baselines. Returns the row and, if
    `keep`, what the sweep needs to time variants on the same inputs later (sweep_variant)."""
    import torch

    spec = specs[0]
    ref = load_module(spec.reference, f"ref_{name}", case.params)
    kernel = load_module(KERNELS / f"{name}.py", f"kernel_{name}")
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
                del compiled
    for other in specs[1:]:  # same constructor and draws, so the same parameters
        other_ref = load_module(other.reference, f"ref_{other.name}", case.params)
        other_model, _, _ = rk.build(other_ref, kernel, dtype, seed)
        with torch.no_grad():
            agree = rk.compare(rk.as_list(other_model(*inputs)), refs, tol)
            baselines[other.name] = rk.bench(lambda: other_model(*inputs)) if timed else None
        row[f"{other.name}_agrees"] = agree["ok"]
    row["baselines_ms"] = baselines
    row["variants"] = []
    finish_row(row, timed)
    return row, ((kernel, new, inputs, refs, tol) if keep else None)


def sweep_variant(rk, row, kept, variant, timed) -> None:
    """Time one CONFIG variant on a case's kept inputs (the kernel's CONFIG restored after)."""
    kernel, new, inputs, refs, tol = kept
    default_cfg = dict(kernel.CONFIG)
    try:
        kernel.CONFIG.clear()
        kernel.CONFIG.update(default_cfg, **variant)
        entry = kernel_call(rk, new, inputs, refs, tol, timed, 30)
    finally:
        kernel.CONFIG.clear()
        kernel.CONFIG.update(default_cfg)
    row["variants"].append({"variant": variant, **entry})
    finish_row(row, timed)


def finish_row(row, timed) -> None:
    """Speedups, bandwidth and the best correct variant of a row, from what it holds so far."""
    ms = row["default"]["ms"]
    baselines = row["baselines_ms"]
    if ms or timed:
        row["speedups"] = {b: t / ms for b, t in baselines.items() if t and ms}
        row["gbps"] = row["bytes"] / ms / 1e6 if row.get("bytes") and ms else None
        row["tflops"] = row["flops"] / ms / 1e9 if row.get("flops") and ms else None
        good = [v for v in row["variants"] if v.get("ok") and v.get("ms")]
        best = min(good, key=lambda v: v["ms"], default=None)
        row.pop("best_variant", None)
        if best and (not ms or best["ms"] < ms):
            row["best_variant"] = {
                "variant": best["variant"],
                "ms": best["ms"],
                "speedups": {b: t / best["ms"] for b, t in baselines.items() if t},
            }


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


def summarize(paths: list[Path], out: Path, stem: str) -> int:
    """One report from several runs' summary JSONs (a missing or unreadable one is noted, not fatal):
    the first run's environment and peaks (that found), every run's results, one variant ranking."""
    report = {"environment": None, "peaks": None, "results": [], "runs": []}
    for path in paths:
        try:
            part = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            report["runs"].append({"path": str(path), "error": f"{type(exc).__name__}: {exc}"})
            continue
        report["runs"].append({"path": str(path), **part["environment"]})
        report["environment"] = report["environment"] or dict(part["environment"])
        report["peaks"] = report["peaks"] or part.get("peaks")
        report["results"] += part["results"]
    if report["environment"] is None:
        print(
            f"bench/kernels/recsys/recsys_operators.py: none of {len(paths)} JSON files could be read", file=sys.stderr
        )
        return 1
    report["variant_ranking"] = variant_ranking(report["results"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    text = markdown(report)
    missing = [r for r in report["runs"] if "error" in r]
    if missing:
        text += "\nRuns not found: " + "; ".join(f"{r['path']} ({r['error']})" for r in missing) + "\n"
    (out / f"{stem}.md").write_text(text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the JSON and markdown results")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=list(OPERATORS), help="kernels to run")
    parser.add_argument("--device", choices=["cuda", "interpret"], default="cuda")
    parser.add_argument("--no-sweep", action="store_true", help="time the default CONFIG only")
    parser.add_argument("--budget-s", type=float, default=1e9, help="no new variant is started after this many seconds")
    parser.add_argument("--sweep-shapes", type=int, help="sweep variants at the first N shapes (default SWEEP_SHAPES)")
    parser.add_argument(
        "--shapes-at", nargs="+", type=int, metavar="I", help="run only these shape indices of the spec (GPU)"
    )
    parser.add_argument(
        "--sweep-at", nargs="+", type=int, metavar="I", help="sweep variants at these shape indices only"
    )
    parser.add_argument("--sweep-dtypes", nargs="+", metavar="DTYPE", help="sweep variants at these dtypes only")
    parser.add_argument(
        "--variants", nargs="+", type=int, metavar="I", help="sweep only these VARIANTS entries (0-based indices)"
    )
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--stem", default="recsys_operators", help="name of the summary files (STEM.json, STEM.md)")
    parser.add_argument("--no-cases", action="store_true", help="no per-case JSON files (OUT/cases/)")
    parser.add_argument("--no-markdown", action="store_true", help="the summary JSON only")
    parser.add_argument("--no-peaks", action="store_true", help="skip the copy/matmul ceiling measurement")
    parser.add_argument(
        "--summarize",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="no run: merge these summary JSONs (of runs with --only) into OUT/STEM.md and OUT/STEM.json",
    )
    args = parser.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize, args.out, args.stem)
    interpret = args.device == "interpret"
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    if not interpret and not torch.cuda.is_available():
        print(
            "bench/kernels/recsys/recsys_operators.py: no CUDA GPU here; use --device interpret for a CPU check (untimed)",
            file=sys.stderr,
        )
        return 2
    import reference_kernels as rk
    import triton

    from kernelevolve.spec import Case, load_spec

    if interpret:
        from kernelevolve.evaluation.interpreter_compat import patch_triton_interpreter

        patch_triton_interpreter()
        rk.DEVICE = "cpu"
    start = time.time()
    deadline = start + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_cases:
        (args.out / "cases").mkdir(exist_ok=True)
    report = {
        "environment": {
            "device": "Triton interpreter (CPU, untimed)" if interpret else torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "command": " ".join(sys.argv),
        },
        "peaks": None if interpret or args.no_peaks else rk.peaks(),
        "results": [],
    }

    def save():
        report["variant_ranking"] = variant_ranking(report["results"])
        (args.out / f"{args.stem}.json").write_text(json.dumps(report, indent=1, default=str))
        if not args.no_markdown:
            (args.out / f"{args.stem}.md").write_text(markdown(report))

    for name in args.only or list(OPERATORS):
        specs = [load_spec(REPO / "specs" / f"{s}.yaml") for s in OPERATORS[name]]
        cases = specs[0].cases("interpret" if interpret else "cuda")
        if not interpret:
            cases += [Case(params=p, dtype=d) for p in EXTRA_SHAPES.get(name, []) for d in specs[0].dtypes]
        # First the default and the baselines at every shape, then the variants one at a time over
        # all swept shapes (so a sweep cut short by the budget still compares whole variants).
        kept = []
        shapes = list(dict.fromkeys(shape_text(c.params) for c in cases))
        if args.shapes_at and not interpret:
            cases = [c for c in cases if shapes.index(shape_text(c.params)) in args.shapes_at]
        for i, case in enumerate(cases):
            try:
                sweep = not args.no_sweep and (
                    interpret
                    or shapes.index(shape_text(case.params)) < (args.sweep_shapes or SWEEP_SHAPES.get(name, len(cases)))
                )
                sweep = sweep and (interpret or not args.sweep_dtypes or case.dtype in args.sweep_dtypes)
                sweep = sweep and (
                    interpret or not args.sweep_at or shapes.index(shape_text(case.params)) in args.sweep_at
                )
                row, ctx = run_case(rk, name, specs, case, args.seed, not interpret, sweep)
                d = row["default"]
                print(
                    f"{name:13s} {shape_text(case.params):40s} {case.dtype:9s} {'ok' if d['ok'] else 'WRONG'} "
                    f"{d['ms'] if d['ms'] is None else round(d['ms'], 4)} ms; baselines {row['baselines_ms']}",
                    flush=True,
                )
                if ctx is not None:
                    kept.append((i, row, ctx))
            except Exception as exc:  # one bad case must not lose the others
                traceback.print_exc()
                row = {
                    "kernel": name,
                    "shape": case.params,
                    "dtype": case.dtype,
                    "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                }
            report["results"].append(row)
            save()
        variants = VARIANTS.get(name, [])
        if args.variants and not interpret:
            variants = [variants[i] for i in args.variants if i < len(variants)]
        for variant in variants if kept else []:
            if time.time() > deadline:
                for _, row, _ in kept:
                    row["sweep_cut_short"] = True
                break
            for _, row, ctx in kept:
                try:
                    sweep_variant(rk, row, ctx, variant, not interpret)
                except Exception as exc:
                    row["variants"].append({"variant": variant, "ok": False, "ms": None, "message": repr(exc)[:200]})
            print(
                f"{name:13s} {json.dumps(variant)}: "
                + ", ".join(
                    f"{v['ms']:.4f}" if v.get("ok") and v.get("ms") else ("ok" if v.get("ok") else "FAIL")
                    for v in (row["variants"][-1] for _, row, _ in kept)
                ),
                flush=True,
            )
            save()
        del kept
        rk.free_cache()
        if not args.no_cases:
            for i, row in enumerate(r for r in report["results"] if r.get("kernel") == name):
                (args.out / "cases" / f"{name}_{i}.json").write_text(json.dumps(row, indent=1, default=str))
    report["environment"]["wall_s"] = time.time() - start
    save()
    print(markdown(report))
    ok = all(
        "error" not in r and r["default"]["ok"] and all(v.get("ok") for v in r["variants"]) for r in report["results"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
