"""Benchmark every reference kernel in knowledge_base/kernels/ on a CUDA GPU.

For each kernel whose front matter names a spec (`spec: rmsnorm` -> specs/rmsnorm.yaml), at the
spec's production shapes and dtypes, in one process: check ModelNew against a float64 reference
(fresh random inputs, torch.empty & co. poisoned with NaN), then time ModelNew, the eager Model
and torch.compile(Model) with triton.testing.do_bench (median, L2 flushed before each run). The
same run measures two ceilings: device-to-device copy bandwidth (bytes read + written) and the
bf16 8192^3 matmul rate. Reported: latency, GB/s and TFLOP/s from the spec's bytes/flops
expressions, fraction of the copy ceiling, speedup over eager and over torch.compile.

    python bench/kernels/reference_kernels.py --out OUT/reference_kernels.json --md OUT/reference_kernels.md
        [--only rmsnorm softmax] [--sweep --sweep-s 150]

(the runs so far: bench/results/all_operators/h200/2026-11-21_reference_kernels/ and
bench/results/all_operators/h200/2026-11-22_after_shared_code_refactor/).

--sweep then times, for RMSNorm, softmax and cross-entropy, every one-knob move of the kernel's TUNABLES on the path
each shape takes (correctness-checked too), to retune defaults.
"""

from __future__ import annotations

import argparse
import copy
import contextlib
import json
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, declared, load_module, one_knob_moves  # noqa: E402

from kernelevolve.knowledge.frontmatter import kernel_docstring, split_front_matter  # noqa: E402
from kernelevolve.spec import SpecError, load_spec  # noqa: E402

SKIPPED: list[dict] = []  # kernels discover() could not use, with the reason
DEVICE = "cuda"  # a module global so a CPU smoke test can swap it
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

# --sweep: around each case's default CONFIG, every knob of the path its row length takes (the tile kernel, or
# the long-row kernels) moved alone to each other value the kernel's TUNABLES allow: the neighbourhood the
# offline operator searches, so that a retuned default stays a point of the declared space. A move of
# single_block_max_n is timed only where it changes the case's path. Judged on the column constant in COLUMNS.
COLUMNS = {"rmsnorm": "N", "softmax": "N", "cross_entropy": "V"}
PATH_KNOBS = {
    "tile": ["single_block_max_n", "tile_elems", "elems_per_thread", "max_warps"],
    "split": [
        "single_block_max_n",
        "chunk_n",
        "split_block_n",
        "split_num_warps",
        "split_programs_per_sm",
        "num_stages",
        "reverse_second_pass",
        "l2_hints",
        "long_n",
        "long_split_block_n",
        "long_split_num_warps",
    ],
}


def plan_for(name: str, case, kernel_path: Path) -> list[dict]:
    """The one-knob CONFIG moves (from the kernel's TUNABLES) that apply to this case."""
    col = case.params.get(COLUMNS.get(name, ""))
    if col is None:
        return []
    default = declared(kernel_path)

    def regime(single_block_max_n: int) -> str:
        return "tile" if 1 << max(0, int(col) - 1).bit_length() <= single_block_max_n else "split"

    path = regime(default.config["single_block_max_n"])
    knobs = [k for k in PATH_KNOBS[path] if k in default.tunables]
    return [
        move
        for move in one_knob_moves(kernel_path, knobs)
        if "single_block_max_n" not in move or regime(move["single_block_max_n"]) != path
    ]


# -- loading ---------------------------------------------------------------------------------
def discover(only: list[str] | None) -> list[tuple[str, Path, object]]:
    """(kernel name, kernel file, Spec) for every kernel whose front matter names a spec."""
    found = []
    for path in sorted(KERNELS.glob("*.py")):
        if only and path.stem not in only:
            continue
        header, _ = split_front_matter(kernel_docstring(path.read_text(), path), path)
        if "spec" not in header:
            print(f"skip {path.name}: front matter names no spec", file=sys.stderr)
            SKIPPED.append({"kernel": path.stem, "reason": "front matter names no spec"})
            continue
        try:
            found.append((path.stem, path, load_spec(REPO / "specs" / f"{header['spec']}.yaml")))
        except SpecError as exc:  # one broken spec should not stop the others
            print(f"skip {path.name}: {exc}", file=sys.stderr)
            SKIPPED.append({"kernel": path.stem, "reason": str(exc)})
    missing = set(only or []) - {name for name, _, _ in found}
    if missing:
        raise SystemExit(f"--only: no kernel named {', '.join(sorted(missing))} in knowledge_base/kernels/")
    return found


# -- measuring ---------------------------------------------------------------------------------
def bench(fn, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def peaks() -> dict:
    n = 1 << 30  # 2 GiB of bf16 each way
    src = torch.randn(n, device=DEVICE, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_ms = bench(lambda: dst.copy_(src))
    del src, dst
    a = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    mm_ms = bench(lambda: torch.mm(a, b))
    del a, b
    free_cache()
    return {
        "copy_ms": copy_ms,
        "copy_gbps": 2 * 2 * n / copy_ms / 1e6,
        "matmul_ms": mm_ms,
        "matmul_tflops": 2 * 8192**3 / mm_ms / 1e9,
    }


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty & co. return NaN-filled tensors (int: max value), so unwritten outputs show."""
    names = ["empty", "empty_like", "empty_strided"]
    saved = {n: getattr(torch, n) for n in names}

    def wrap(fn):
        def allocate(*args, **kwargs):
            t = fn(*args, **kwargs)
            if t.is_floating_point():
                t.fill_(float("nan"))
            elif t.numel() and t.dtype != torch.bool:
                t.fill_(torch.iinfo(t.dtype).max)
            return t

        return allocate

    for n in names:
        setattr(torch, n, wrap(saved[n]))
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch, n, fn)


def as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def compare(outs, refs, tol) -> dict:
    worst = {"ok": True, "max_abs_err": 0.0, "rel_err": 0.0, "message": ""}
    for out, ref in zip(outs, refs):
        got, want = out.detach().double(), ref.detach().double()
        if got.shape != want.shape:
            return {"ok": False, "message": f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"}
        finite = torch.isfinite(want)
        bad_nan = (~torch.isfinite(got) & finite).sum().item()
        diff = (got - want).abs().where(finite, torch.zeros_like(got))
        bad = (diff > tol["atol"] + tol["rtol"] * want.abs()).sum().item()
        worst["max_abs_err"] = max(worst["max_abs_err"], diff.max().item())
        worst["rel_err"] = max(
            worst["rel_err"], (diff.norm() / want.where(finite, torch.zeros_like(want)).norm().clamp_min(1e-30)).item()
        )
        if bad_nan or bad:
            worst["ok"] = False
            worst["message"] = f"{bad_nan} non-finite, {bad} outside tolerance of {out.numel()}"
    return worst


def free_cache():
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def to_device(x, dtype):
    if isinstance(x, torch.Tensor):
        x = x.to(DEVICE)
        return x.to(dtype) if x.is_floating_point() and dtype is not None else x
    return x


def build(ref, kernel, dtype, seed):
    torch.manual_seed(seed)
    init = ref.get_init_inputs()
    model = ref.Model(*init)
    torch.manual_seed(seed)
    new = kernel.ModelNew(*init)
    own = new.state_dict()
    new.load_state_dict({k: v for k, v in model.state_dict().items() if k in own}, strict=False)
    model, new = model.to(DEVICE).eval(), new.to(DEVICE).eval()
    if dtype is not None:
        model, new = model.to(dtype), new.to(dtype)
    torch.manual_seed(seed + 1)
    inputs = [to_device(x, dtype) for x in ref.get_inputs()]
    return model, new, inputs


def reference_outputs(model, inputs):
    m64 = copy.deepcopy(model).double()
    xs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    return [o.float() if o.is_floating_point() else o for o in as_list(m64(*xs))]  # fp32 copy keeps memory down


def run_case(name, kernel_path, spec, case, peak, seed) -> dict:
    ref = load_module(spec.reference, f"ref_{name}", case.params)
    kernel = load_module(kernel_path, f"kernel_{name}")
    dtype = DTYPES.get(case.dtype)
    row = {"kernel": name, "spec": spec.name, "shape": case.params, "dtype": case.dtype}
    nbytes, flops = spec.roofline(case)
    with torch.no_grad():
        model, new, inputs = build(ref, kernel, dtype, seed)
        refs = reference_outputs(model, inputs)
        with poisoned_allocations():
            outs = as_list(new(*inputs))
        sync()
        row.update(compare(outs, refs, spec.tolerance(case.dtype).model_dump()))
        del outs
        row["new_ms"] = bench(lambda: new(*inputs))
        row["eager_ms"] = bench(lambda: model(*inputs))
        torch._dynamo.reset()
        compiled = torch.compile(model, dynamic=False)
        t0 = time.time()
        compiled(*inputs)
        row["compile_s"] = time.time() - t0
        row["compile_ms"] = bench(lambda: compiled(*inputs))
    for key in ("new", "eager", "compile"):
        ms = row[f"{key}_ms"]
        row[f"{key}_gbps"] = nbytes / ms / 1e6 if nbytes else None
    row["new_tflops"] = flops / row["new_ms"] / 1e9 if flops else None
    row["fraction_of_copy_peak"] = row["new_gbps"] / peak["copy_gbps"] if nbytes else None
    row["speedup_vs_eager"] = row["eager_ms"] / row["new_ms"]
    row["speedup_vs_compile"] = row["compile_ms"] / row["new_ms"]
    row["_state"] = (kernel, new, inputs, refs)
    return row


def sweep_case(name, spec, case, state, budget_s: float) -> list[dict]:
    kernel, new, inputs, refs = state
    default = dict(kernel.CONFIG)
    rows = []
    deadline = time.time() + budget_s
    for variant in plan_for(name, case, Path(kernel.__file__)):
        if time.time() > deadline:
            break
        kernel.CONFIG.clear()
        kernel.CONFIG.update(default, **variant)
        entry = {"kernel": name, "shape": case.params, "dtype": case.dtype, "variant": variant}
        try:
            with torch.no_grad():
                with poisoned_allocations():
                    outs = as_list(new(*inputs))
                entry.update(compare(outs, refs, spec.tolerance(case.dtype).model_dump()))
                del outs
                entry["new_ms"] = bench(lambda: new(*inputs), warmup_ms=5, rep_ms=30)
        except Exception as exc:  # a variant that fails to compile is a finding, not a crash
            entry.update(
                ok=False, message=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            )
        rows.append(entry)
    kernel.CONFIG.clear()
    kernel.CONFIG.update(default)
    return rows


# -- reporting ---------------------------------------------------------------------------------
def shape_text(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def markdown(report: dict) -> str:
    p = report["peaks"]
    lines = [
        f"# Reference kernels on {report['environment']['gpu']}",
        "",
        f"torch {report['environment']['torch']}, triton {report['environment']['triton']}; medians of "
        "triton.testing.do_bench (L2 flushed). Ceilings measured in the same run: device-to-device copy "
        f"{p['copy_gbps']:.0f} GB/s (read+write), bf16 8192^3 matmul {p['matmul_tflops']:.0f} TFLOP/s.",
        "",
        "| kernel | shape | dtype | ok | ModelNew ms | GB/s | % of copy | eager ms | compile ms | vs eager | vs compile |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["results"]:
        if "error" in r:
            lines.append(
                f"| {r['kernel']} | {shape_text(r['shape'])} | {r['dtype']} | ERROR: {r['error'][:80]} | | | | | | | |"
            )
            continue
        gbps = f"{r['new_gbps']:.0f}" if r.get("new_gbps") else "-"
        frac = f"{100 * r['fraction_of_copy_peak']:.0f}%" if r.get("fraction_of_copy_peak") else "-"
        lines.append(
            f"| {r['kernel']} | {shape_text(r['shape'])} | {r['dtype']} | {'yes' if r['ok'] else 'NO'} | {r['new_ms']:.4f} | "
            f"{gbps} | {frac} | {r['eager_ms']:.4f} | {r['compile_ms']:.4f} | {r['speedup_vs_eager']:.2f}x | {r['speedup_vs_compile']:.2f}x |"
        )
    if report.get("sweep"):
        lines += [
            "",
            "## CONFIG sweep (changes from the defaults; ms, median of a short do_bench window)",
            "",
            "| kernel | shape | variant | ok | ms | vs default |",
            "| --- | --- | --- | --- | ---: | ---: |",
        ]
        base = {(r["kernel"], shape_text(r["shape"])): r.get("new_ms") for r in report["results"] if "error" not in r}
        for s in report["sweep"]:
            ref_ms = base.get((s["kernel"], shape_text(s["shape"])))
            ms = s.get("new_ms")
            ratio = f"{ref_ms / ms:.2f}x" if ms and ref_ms else "-"
            lines.append(
                f"| {s['kernel']} | {shape_text(s['shape'])} | `{json.dumps(s['variant'])}` | "
                f"{'yes' if s.get('ok') else 'NO ' + s.get('message', '')[:60]} | {ms if ms is None else f'{ms:.4f}'} | {ratio} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="kernel names (file stems) to run")
    parser.add_argument("--out", type=Path, required=True, help="the JSON report")
    parser.add_argument("--md", type=Path, help="also write a markdown table here")
    parser.add_argument(
        "--sweep", action="store_true", help="also time each one-knob move of the kernel's TUNABLES (see PATH_KNOBS)"
    )
    parser.add_argument(
        "--sweep-s", type=float, default=1e9, help="seconds for all sweeps, shared equally by the cases"
    )
    parser.add_argument("--seed", type=int, default=20261121)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "bench/kernels/reference_kernels.py needs a CUDA GPU (timings under the interpreter mean nothing)",
            file=sys.stderr,
        )
        return 2
    start = time.time()
    import triton

    kernels = discover(args.only)
    # Sweep seconds are shared by the cases in proportion to how many variants apply to each.
    n_variants = (
        {(name, c.label): len(plan_for(name, c, path)) for name, path, spec in kernels for c in spec.cases("cuda")}
        if args.sweep
        else {}
    )
    total_variants = max(1, sum(n_variants.values()))
    report = {
        "environment": {
            "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "command": " ".join(sys.argv),
        },
        "peaks": peaks(),
        "results": [],
        "sweep": [],
        "skipped": SKIPPED,
    }
    print(
        f"peaks: copy {report['peaks']['copy_gbps']:.0f} GB/s, bf16 matmul {report['peaks']['matmul_tflops']:.0f} TFLOP/s",
        flush=True,
    )

    def save():
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str))
        if args.md:
            args.md.write_text(markdown(report))

    for name, path, spec in kernels:
        for case in spec.cases("cuda"):
            try:
                row = run_case(name, path, spec, case, report["peaks"], args.seed)
                state = row.pop("_state")
                report["results"].append(row)
                print(
                    f"{name:14s} {shape_text(case.params):22s} {'ok' if row['ok'] else 'WRONG'} new {row['new_ms']:.4f} ms "
                    f"({row['new_gbps'] or 0:.0f} GB/s) eager {row['eager_ms']:.4f} compile {row['compile_ms']:.4f}",
                    flush=True,
                )
                if args.sweep:
                    report["sweep"] += sweep_case(
                        name, spec, case, state, args.sweep_s * n_variants[(name, case.label)] / total_variants
                    )
                del state
            except Exception as exc:
                traceback.print_exc()
                report["results"].append(
                    {
                        "kernel": name,
                        "spec": spec.name,
                        "shape": case.params,
                        "dtype": case.dtype,
                        "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                    }
                )
            free_cache()
            save()
    report["environment"]["wall_s"] = time.time() - start
    save()
    print(markdown(report))
    return 0 if all(r.get("ok") for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
