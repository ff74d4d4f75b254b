"""This project's RMSNorm, softmax and cross-entropy kernels (Triton and CuTe DSL) beside QuACK and
Liger-Kernel, on a CUDA GPU, in one run, at the spec shapes (bf16), with the copy ceiling.

Per shape: one input set, every implementation checked against the float64 reference (spec
tolerances; a wrong or failing one is reported, never timed), then timed with
triton.testing.do_bench (median ms, L2 flushed). GB/s uses the spec's `bytes` expression (the
fewest bytes the operator must move), so every implementation is measured against the same floor;
the copy ceiling is a device-to-device torch copy of the same number of bytes per shape. The peers
are imported lazily: one that is not installed (or fails to import) is named in the output and
the JSON, and the run goes on without it.

    python bench/peers_bench.py --out $OUT/peers.json [--md $OUT/peers.md] [--only rmsnorm softmax]

Implementations: `triton` (knowledge_base/kernels/<op>.py), `cute` (<op>_cute.py), `quack`
(quack-kernels: rmsnorm_fwd, softmax, cross_entropy_fwd), `liger` (liger-kernel: liger_rms_norm,
liger_softmax, liger_cross_entropy with reduction="none"; Liger's forward also writes the gradient
into the logits, as it does in training) and, with --impls ... torch.compile, the reference Model
compiled.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "knowledge_base" / "kernels"))

from kernelevolve.harness.runtime import modules  # noqa: E402
from kernelevolve.spec import Case, load_spec  # noqa: E402

OPS = ("rmsnorm", "softmax", "cross_entropy")


# -- the peers, imported on first use -------------------------------------------------------
def _peer(module: str):
    """The module, or the one-line reason it cannot be used."""
    try:
        return importlib.import_module(module), None
    except Exception as exc:  # not installed, or a broken install: either way, not timed
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def quack_fn(op: str, ignore_index: int, eps: float):
    if op == "rmsnorm":
        mod, why = _peer("quack.rmsnorm")
        return (None, why) if mod is None else (lambda x, w: mod.rmsnorm_fwd(x, w, eps=eps)[0], None)
    if op == "softmax":
        mod, why = _peer("quack.softmax")
        return (None, why) if mod is None else (lambda x: mod.softmax(x), None)
    mod, why = _peer("quack.cross_entropy")
    return (None, why) if mod is None else (lambda x, t: mod.cross_entropy_fwd(x, t, ignore_index=ignore_index), None)


def liger_fn(op: str, ignore_index: int, eps: float):
    mod, why = _peer("liger_kernel.transformers.functional")
    if mod is None:
        return None, why
    if op == "rmsnorm":
        return (lambda x, w: mod.liger_rms_norm(x, w, eps)), None
    if op == "softmax":
        return (lambda x: mod.liger_softmax(x)), None
    return (lambda x, t: mod.liger_cross_entropy(x, t, ignore_index=ignore_index, reduction="none")), None


# -- one operator ---------------------------------------------------------------------------
_LOADED: dict = {}


def _ours(op: str, language: str):
    """ModelNew of this project's kernel (loaded once per run), or the reason it cannot be loaded."""
    if (op, language) not in _LOADED:
        _LOADED[op, language] = _load_ours(op, language)
    return _LOADED[op, language]


def _load_ours(op: str, language: str):
    path = ROOT / "knowledge_base" / "kernels" / (f"{op}_cute.py" if language == "cute" else f"{op}.py")
    try:
        return modules.load_module(str(path), f"peers_{op}_{language}").ModelNew, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _compare(out: torch.Tensor, ref: torch.Tensor, tol) -> str | None:
    """None when out matches ref elementwise within the spec's tolerance; else what is wrong."""
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    o = out.double()
    bad = ~((o - ref).abs() <= tol.atol + tol.rtol * ref.abs())
    if bool(bad.any()):
        return f"{int(bad.sum())} elements outside tolerance (max abs err {float((o - ref).abs().nan_to_num(1e30).max()):.3g})"
    return None


def run_op(op: str, impls: list[str], report: dict, deadline: float) -> None:
    from triton.testing import do_bench

    spec = load_spec(ROOT / "specs" / f"{op}.yaml")
    # Longest rows first: they are where the implementations differ, and a run may stop at its budget.
    for params in sorted(spec.shapes, key=lambda s: -max(v for v in s.values() if isinstance(v, int))):
        if time.monotonic() > deadline:
            report["notes"].append(f"{op} {params}: not run, time budget spent")
            continue
        case = Case(params=params, dtype="bfloat16")
        ref_mod = modules.load_module(str(spec.reference), f"peers_ref_{op}", params)
        dtype = modules.dtype_of({"dtype": "bfloat16"})
        reference = modules.build_reference(ref_mod, 7, dtype, "cuda")
        inputs = modules.make_inputs(ref_mod, 8, dtype, "cuda")
        with torch.no_grad():
            wide = copy.deepcopy(reference).double()
            expected = wide(*[x.double() if x.is_floating_point() else x for x in inputs]).double()
        del wide
        nbytes, _ = spec.roofline(case)
        tol = spec.tolerance("bfloat16")
        row = {"op": op, "shape": params, "bytes": nbytes, "results": {}}
        # The copy ceiling for this many bytes: read nbytes/2, write nbytes/2.
        src = torch.empty(int(nbytes // 2), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_ms = do_bench(lambda: dst.copy_(src))
        row["copy_gbps"] = nbytes / copy_ms / 1e6
        del src, dst
        eps = getattr(reference, "eps", 1e-6)
        ignore_index = getattr(reference, "ignore_index", -100)
        for impl in impls:
            fn, why = None, None
            if impl in ("triton", "cute"):
                cls, why = _ours(op, impl)
                if cls is not None:
                    model = modules.build_candidate(
                        ref_mod, type("M", (), {"ModelNew": cls}), reference, 7, dtype, "cuda"
                    )
                    fn = model
            elif impl == "torch.compile":
                fn = torch.compile(reference)
            elif impl in ("quack", "liger"):
                make = quack_fn if impl == "quack" else liger_fn
                fn, why = make(op, ignore_index, eps)
                if fn is not None and op == "rmsnorm":
                    w = reference.weight.detach()
                    fn = (lambda f: lambda x: f(x, w))(fn)
            if fn is None:
                row["results"][impl] = {"error": f"unavailable: {why}"}
                continue
            try:
                call_inputs = [x.clone() for x in inputs]  # Liger's CE writes into its logits
                with torch.no_grad():
                    out = fn(*call_inputs)
                torch.cuda.synchronize()
                out = out[0] if isinstance(out, (tuple, list)) else out
                # Timed even when outside the spec's tolerance (a peer may round differently), but marked.
                problem = _compare(out, expected, tol)
                with torch.no_grad():
                    ms = do_bench(lambda: fn(*call_inputs))
                row["results"][impl] = {
                    "ms": ms,
                    "gbps": nbytes / ms / 1e6,
                    "of_copy": nbytes / ms / 1e6 / row["copy_gbps"],
                    "check": problem or "correct",
                }
            except Exception as exc:
                row["results"][impl] = {
                    "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                }
                report["tracebacks"].append(f"{op} {params} {impl}:\n{traceback.format_exc()[-3000:]}")
            finally:
                torch.cuda.empty_cache()
        ours = [r["gbps"] for k, r in row["results"].items() if k in ("triton", "cute") and r.get("check") == "correct"]
        peer = row["results"].get("quack", {}).get("gbps")
        row["best_ours_gbps"] = max(ours) if ours else None
        row["ours_vs_quack"] = (max(ours) / peer) if ours and peer else None
        report["rows"].append(row)
        print(
            json.dumps({k: row[k] for k in ("op", "shape", "copy_gbps", "best_ours_gbps", "ours_vs_quack")}), flush=True
        )


def markdown(report: dict) -> str:
    impls = report["implementations"]
    lines = [
        f"# Peers on {report['gpu']} (torch {report['torch']}, triton {report['triton']})",
        "",
        "GB/s from the spec's fewest-bytes expression; the copy column is a device-to-device copy of as many bytes.",
        "",
        "| op | shape | copy | " + " | ".join(impls) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in impls) + " |",
    ]
    for row in report["rows"]:
        cells = []
        for impl in impls:
            r = row["results"].get(impl, {})
            if "gbps" in r:
                cells.append(f"{r['gbps']:.0f}" + ("" if r["check"] == "correct" else " (wrong)"))
            else:
                cells.append(r.get("error", "-")[:40])
        shape = ",".join(f"{k}={v}" for k, v in row["shape"].items())
        lines.append(f"| {row['op']} | {shape} | {row['copy_gbps']:.0f} | " + " | ".join(cells) + " |")
    if report["unavailable"]:
        lines += ["", "Unavailable: " + "; ".join(f"{k} ({v})" for k, v in report["unavailable"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON report path")
    ap.add_argument("--md", help="also write a markdown table here")
    ap.add_argument("--only", nargs="*", choices=OPS, help="operators to run (default: all three)")
    ap.add_argument(
        "--impls",
        nargs="*",
        default=["triton", "cute", "quack", "liger"],
        help="implementations to time: triton cute quack liger torch.compile (default: all but torch.compile)",
    )
    ap.add_argument("--budget-s", type=float, default=600.0, help="stop starting new shapes after this long")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("peers_bench: needs a CUDA GPU (none is visible)", file=sys.stderr)
        return 2
    import triton

    report = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "implementations": args.impls,
        "unavailable": {},
        "versions": {},
        "rows": [],
        "notes": [],
        "tracebacks": [],
    }
    for name, module in (("quack", "quack"), ("liger", "liger_kernel"), ("cute", "cutlass")):
        if name in args.impls:
            mod, why = _peer(module)
            if mod is None:
                report["unavailable"][name] = why
            else:
                dist = {"quack": "quack-kernels", "liger": "liger-kernel", "cute": "nvidia-cutlass-dsl"}[name]
                try:
                    from importlib.metadata import version

                    report["versions"][name] = version(dist)
                except Exception:
                    report["versions"][name] = "unknown"
    if report["unavailable"]:
        print("unavailable: " + "; ".join(f"{k} ({v})" for k, v in report["unavailable"].items()), flush=True)
    deadline = time.monotonic() + args.budget_s
    out = Path(args.out)
    for op in args.only or OPS:
        run_op(op, args.impls, report, deadline)
        out.write_text(json.dumps(report, indent=2))
    if args.md:
        Path(args.md).write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
