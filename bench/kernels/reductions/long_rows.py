"""Long-row RMSNorm and softmax on a CUDA GPU: the committed CONFIG against cooperative variants.

For each kernel and long-row shape (bf16, N from 32768 to 262144; rows of N <= 16384 take the tile
kernel whatever these variants change, so they are not re-timed here): three
fresh random input sets with their float64 references, then every variant is checked on all three
(outputs in NaN-poisoned memory, spec tolerances) and, if correct, timed with
triton.testing.do_bench (median, L2 flushed) next to torch.compile of the reference Model, which is
timed in the same run. A variant is a CONFIG change plus, for experiments only, the module's
COOP_PREFETCH switch.

    python bench/kernels/reductions/long_rows.py --out $OUT/long_rows.json --md $OUT/long_rows.md [--budget-s 360]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]
import reference_kernels as rk  # noqa: E402  (poisoned allocations, compare, do_bench)
from benchlib import load_module  # noqa: E402

from kernelevolve.spec import Case  # noqa: E402

SEEDS = (11, 12, 13)
# Production shapes first: the run may stop at its time budget.
SHAPES = [
    {"M": 2048, "N": 65536},
    {"M": 1024, "N": 262144},
    {"M": 300, "N": 100003},  # odd: masked tails, unaligned rows
    {"M": 4096, "N": 32768},
    {"M": 2048, "N": 131072},
]
COOP = {"cooperative": True}
# (label, CONFIG change, COOP_PREFETCH, only at this N or None)
VARIANTS = [
    ("default", {}, True, None),
    ("coop 16384/16w", dict(COOP, chunk_n=16384, split_num_warps=16), True, None),
    ("coop 32768/16w", dict(COOP, chunk_n=32768, split_num_warps=16), True, None),
    ("coop 32768/32w", dict(COOP, chunk_n=32768, split_num_warps=32), True, None),
    ("coop 16384/16w no prefetch", dict(COOP, chunk_n=16384, split_num_warps=16), False, 65536),
    ("coop 65536/32w", dict(COOP, chunk_n=65536, split_num_warps=32), True, 65536),  # a row per program
    ("tile kernel up to 32768", {"single_block_max_n": 32768}, True, 32768),
]


def inputs_for(ref, new, model, dtype, seed):
    torch.manual_seed(seed)
    xs = [rk.to_device(x, dtype) for x in ref.get_inputs()]
    return xs, rk.reference_outputs(model, xs)


def run_shape(name, path, spec, params, report, deadline):
    case = Case(params=params, dtype="bfloat16")
    ref = load_module(spec.reference, f"ref_{name}", params)
    kernel = load_module(path, f"kernel_{name}")
    default = dict(kernel.CONFIG)
    tol = spec.tolerance("bfloat16").model_dump()
    nbytes, _ = spec.roofline(case)
    model, new, _ = rk.build(ref, kernel, torch.bfloat16, SEEDS[0])
    sets = [inputs_for(ref, new, model, torch.bfloat16, s) for s in SEEDS]
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(model, dynamic=False)
        compiled(*sets[0][0])
        compile_ms = rk.bench(lambda: compiled(*sets[0][0]))
    print(
        f"{name} {rk.shape_text(params)}: torch.compile {compile_ms:.4f} ms ({nbytes / compile_ms / 1e6:.0f} GB/s)",
        flush=True,
    )
    rows = []
    for label, change, prefetch, only_n in VARIANTS:
        if time.time() > deadline or only_n not in (None, params["N"]):
            continue
        kernel.CONFIG.clear()
        kernel.CONFIG.update(default, **change)
        kernel.COOP_PREFETCH = prefetch
        row = {
            "kernel": name,
            "shape": params,
            "variant": label,
            "config_change": change,
            "prefetch": prefetch,
            "compile_ms": compile_ms,
        }
        try:
            with torch.no_grad():
                t0 = time.time()
                checks = []
                for xs, refs in sets:
                    with rk.poisoned_allocations():
                        outs = rk.as_list(new(*xs))
                    rk.sync()
                    checks.append(rk.compare(outs, refs, tol))
                    del outs
                row["first_calls_s"] = time.time() - t0
                row["ok"] = all(c["ok"] for c in checks)
                row["max_abs_err"] = max(c["max_abs_err"] for c in checks)
                row["rel_err"] = max(c["rel_err"] for c in checks)
                row["message"] = "; ".join(c["message"] for c in checks if c["message"])
                if row["ok"]:
                    row["ms"] = rk.bench(lambda: new(*sets[0][0]), warmup_ms=10, rep_ms=60)
                    row["gbps"] = nbytes / row["ms"] / 1e6
                    row["fraction_of_copy"] = row["gbps"] / report["peaks"]["copy_gbps"]
                    row["vs_compile"] = compile_ms / row["ms"]
        except Exception as exc:  # a variant that fails to build is a finding, not a crash
            row.update(ok=False, message=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
        ms = (
            f"{row['ms']:.4f} ms {row['gbps']:.0f} GB/s {row['vs_compile']:.2f}x compile"
            if "ms" in row
            else row.get("message", "")[:120]
        )
        print(f"  {label:28s} {'ok' if row.get('ok') else 'WRONG'} {ms}", flush=True)
        rows.append(row)
    kernel.CONFIG.clear()
    kernel.CONFIG.update(default)
    kernel.COOP_PREFETCH = True
    del sets
    rk.free_cache()
    return rows


def markdown(report) -> str:
    p = report["peaks"]
    lines = [
        f"# Long-row RMSNorm / softmax variants on {report['environment']['gpu']}",
        "",
        f"torch {report['environment']['torch']}, triton {report['environment']['triton']}; bf16; medians of "
        f"do_bench (L2 flushed); copy ceiling {p['copy_gbps']:.0f} GB/s measured in the same run. "
        f"Command: `{report['environment']['command']}`",
        "",
        "| kernel | shape | variant | ok | ms | GB/s | % of copy | compile ms | vs compile |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["results"]:
        if "ms" in r:
            cells = f"{r['ms']:.4f} | {r['gbps']:.0f} | {100 * r['fraction_of_copy']:.0f}% | {r['compile_ms']:.4f} | {r['vs_compile']:.2f}x"
        else:
            cells = f"- | - | - | {r['compile_ms']:.4f} | -"
        ok = "yes" if r.get("ok") else "NO " + r.get("message", "")[:60]
        lines.append(f"| {r['kernel']} | {rk.shape_text(r['shape'])} | {r['variant']} | {ok} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--only", nargs="+", default=["rmsnorm", "softmax"])
    parser.add_argument("--budget-s", type=float, default=360.0, help="stop starting variants after this many seconds")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/kernels/reductions/long_rows.py needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    start = time.time()
    deadline = start + args.budget_s
    report = {
        "environment": {
            "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "command": "python bench/kernels/reductions/long_rows.py "
            + " ".join(argv if argv is not None else sys.argv[1:]),
        },
        "peaks": rk.peaks(),
        "results": [],
    }
    print(f"copy {report['peaks']['copy_gbps']:.0f} GB/s", flush=True)
    kernels = {name: (path, spec) for name, path, spec in rk.discover(args.only)}

    def save():
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str))
        if args.md:
            args.md.write_text(markdown(report))

    # Interleave kernels so both get the production shapes before the budget runs out.
    for params in SHAPES:
        for name in args.only:
            if time.time() > deadline:
                break
            path, spec = kernels[name]
            try:
                report["results"] += run_shape(name, path, spec, params, report, deadline)
            except Exception as exc:
                print(f"{name} {params}: {type(exc).__name__}: {exc}", flush=True)
            save()
    report["environment"]["wall_s"] = time.time() - start
    save()
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
