"""This project's RMSNorm, softmax and cross-entropy kernels (Triton and CuTe DSL) beside QuACK and
Liger-Kernel, on a CUDA GPU, in one run, at the spec shapes (bf16), with the copy ceiling.

Per shape: one input set, every implementation checked against the float64 reference (spec
tolerances; a wrong or failing one is reported, never timed), then timed with
triton.testing.do_bench (median ms, L2 flushed). GB/s uses the spec's `bytes` expression (the
fewest bytes the operator must move), so every implementation is measured against the same floor;
the copy ceiling is a device-to-device torch copy of the same number of bytes per shape. The peers
are imported lazily: one that is not installed (or fails to import) is named in the output and
the JSON, and the run goes on without it.

    python bench/kernels/reductions/peers_bench.py --out $OUT/peers.json [--md $OUT/peers.md] [--only rmsnorm softmax]
    python bench/kernels/reductions/peers_bench.py --sweep --out $OUT/sweep.json --md $OUT/sweep.md

`--sweep` also times the CuTe DSL kernels under several CONFIGs per shape (SWEEP: overrides of the
kernel's CONFIG, deduplicated by the launch plan they give; each one checked like the others, a
failing one recorded with its error and the run goes on), reports the best correct one per shape,
and checks the CuTe kernels on ragged row counts (rows that do not fill the last block).

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
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402

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
    path = KERNELS / (f"{op}_cute.py" if language == "cute" else f"{op}.py")
    try:
        return load_module(path, f"peers_{op}_{language}").ModelNew, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _kernel_module(op: str):
    """This project's CuTe DSL module for `op` (its forward functions take a CONFIG), or the reason."""
    key = (op, "cute-module")
    if key not in _LOADED:
        path = KERNELS / f"{op}_cute.py"
        try:
            _LOADED[key] = load_module(path, f"peers_{op}_cute_module"), None
        except Exception as exc:
            _LOADED[key] = None, _why(exc)
    return _LOADED[key]


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


# CuTe CONFIG overrides tried per shape by --sweep, most promising first (a shape's list is
# deduplicated by the launch plan each gives, so rows that a knob does not touch are timed once).
SWEEP = [
    {},
    {"min_blocks_per_sm": 3},
    {"threads": 128},
    {"threads": 512},
    {"vecs_per_thread": 16},
    {"vecs_per_thread": 16, "threads": 128},
    {"vecs_per_thread": 4},
    {"vecs_per_thread": 4, "threads": 512},
    {"max_cluster": 8},
    {"min_blocks_per_sm": 4},
    {"min_blocks_per_sm": 2, "threads": 512},
    {"short_threads": 256},
    {"short_threads": 64},
    {"min_row_threads": 16},
    {"min_row_threads": 8},
    {"copy_bits": 64},
]
SWEEP_CROSS_ENTROPY = [
    {"prefetch": False},
    {"vecs_per_thread": 32},
    {"vecs_per_thread": 32, "prefetch": False},
    {"vecs_per_thread": 16, "chunk_vecs": 4},
    {"vecs_per_thread": 32, "chunk_vecs": 16},
    {"vecs_per_thread": 16, "max_cluster": 8},
]


# --sweep --focus: only the long rows (N or V >= 65536), these overrides, everything else as --sweep
# (run 3: the shapes still short of QuACK after run 2, with the mbarrier exchange now the default).
_FOCUS_ROWS = [
    {},
    {"min_blocks_per_sm": 3},
    {"min_blocks_per_sm": 4},
    {"stage_min_n": 0},
    {"stage_min_n": 0, "min_blocks_per_sm": 4},
    {"threads": 128},
    {"threads": 128, "min_blocks_per_sm": 6},
    {"threads": 128, "stage_min_n": 0},
    {"threads": 512, "min_blocks_per_sm": 2},
    {"stage_min_n": 0, "threads": 512},
    {"vecs_per_thread": 4},
    {"vecs_per_thread": 4, "threads": 128},
    {"mbarrier": False},
    {"stage_min_n": 1073741824},
]
SWEEP_FOCUS = {
    "rmsnorm": _FOCUS_ROWS,
    # online: one exchange for max and sum (added after run 3, not yet run on a GPU)
    "softmax": [
        {},
        {"online": True},
        {"online": True, "cluster_vecs_per_thread": 8},
        {"online": True, "threads": 128},
        *_FOCUS_ROWS[1:],
    ],
    "cross_entropy": [
        {},
        {"threads": 256},
        {"min_blocks_per_sm": 4},
        {"threads": 256, "min_blocks_per_sm": 3},
        {"vecs_per_thread": 32},
        {"vecs_per_thread": 8},
        {"prefetch": False},
        {"mbarrier": False},
    ],
}

# --sweep --focus short: RMSNorm and softmax below 65536 (run 6: RMSNorm N = 4096 0.995 of QuACK; run 2's
# sweep had short_threads 256 at 4039 against the default's 3981 there).
_SHORT_ROWS = [
    {},
    {"short_threads": 256},
    {"short_threads": 64},
    {"vecs_per_thread": 16},
    {"vecs_per_thread": 4},
    {"short_threads": 256, "vecs_per_thread": 16},
    {"min_row_threads": 16},
    {"threads": 512},
    {"threads": 128},
    {"copy_bits": 64},
]
SWEEP_SHORT = {"rmsnorm": _SHORT_ROWS, "softmax": _SHORT_ROWS}

SWEEP_LATE = [
    {"mbarrier": True},
    {"mbarrier": True, "min_blocks_per_sm": 3},
    {"mbarrier": True, "threads": 128},
    {"mbarrier": True, "vecs_per_thread": 16},
    {"mbarrier": True, "max_cluster": 8},
]


def _plan_key(plan: dict) -> tuple:
    """What makes two sweep entries the same launch: the RowPlan fields and the launch options."""
    keys = (
        "cluster_n",
        "threads",
        "row_threads",
        "vecs",
        "chunks",
        "vec",
        "bits",
        "prefetch",
        "mbarrier",
        "min_blocks",
        "stage",
        "online",
    )
    return tuple(plan.get(k) for k in keys)


def cute_call(module, op: str, config: dict, inputs: list, reference):
    """A call of the CuTe kernel under `config` on `inputs`, as the sweep times it."""
    if op == "rmsnorm":
        w = reference.weight.detach().to(inputs[0].dtype).contiguous()
        return lambda x: module.rmsnorm_forward(x, w, reference.eps, config)
    if op == "softmax":
        return lambda x: module.softmax_forward(x, config)
    ignore_index = getattr(reference, "ignore_index", -100)
    return lambda x, t: module.cross_entropy_forward(x, t, ignore_index, config)


def sweep_cute(
    op: str,
    row: dict,
    inputs: list,
    expected,
    reference,
    tol,
    nbytes: float,
    deadline: float,
    report: dict,
    variants=None,
    rounds: int = 1,
) -> None:
    """Time the CuTe kernel under each SWEEP config (deduplicated by plan) at one shape; each plan's
    figure is the median of `rounds` do_bench medians."""
    from triton.testing import do_bench

    module, why = _kernel_module(op)
    row.setdefault("sweep", [])
    if module is None:
        row["sweep"].append({"error": f"unavailable: {why}"})
        return
    x = inputs[0]
    seen = {_plan_key(e["plan"]) for e in row["sweep"] if "plan" in e}
    if variants is None:
        variants = SWEEP + (SWEEP_CROSS_ENTROPY if op == "cross_entropy" else [])
    for override in variants:
        config = {**module.CONFIG, **override}
        entry = {"override": override}
        try:
            plan = module.row_plan(x.shape[-1], x.element_size() * 8, config)
        except Exception as exc:
            entry["error"] = f"refused: {_why(exc)}"
            row["sweep"].append(entry)
            continue
        key = (
            tuple(plan),
            bool(config.get("prefetch")) and plan.chunks > 1,
            bool(config.get("mbarrier")) and plan.cluster_n > 1,
        )
        entry["plan"] = plan._asdict() | {"prefetch": key[1], "mbarrier": key[2]}
        entry["plan"]["min_blocks"] = int(config.get("min_blocks_per_sm", 0))
        entry["plan"]["stage"] = x.shape[-1] >= config.get("stage_min_n", 1 << 62)
        entry["plan"]["online"] = bool(config.get("online", False))
        if _plan_key(entry["plan"]) in seen or (entry["plan"]["min_blocks"] and plan.rows_per_block > 1):
            continue  # the same launch again; or a register cap where rows share a block (their threads need few)
        seen.add(_plan_key(entry["plan"]))
        if time.monotonic() > deadline:
            entry["error"] = "not run: time budget spent"
            row["sweep"].append(entry)
            continue
        try:
            fn = cute_call(module, op, config, inputs, reference)
            call_inputs = [t.clone() for t in inputs]
            with torch.no_grad():
                out = fn(*call_inputs)
            torch.cuda.synchronize()
            problem = _compare(out, expected, tol)
            with torch.no_grad():
                ms = statistics.median(do_bench(lambda: fn(*call_inputs)) for _ in range(rounds))
            entry.update(ms=ms, gbps=nbytes / ms / 1e6, check=problem or "correct")
        except Exception as exc:
            entry["error"] = _why(exc)
            report["tracebacks"].append(f"{op} {row['shape']} sweep {override}:\n{traceback.format_exc()[-3000:]}")
        finally:
            torch.cuda.empty_cache()
        row["sweep"].append(entry)
        print(f"  sweep {op} {row['shape']} {override} -> {entry.get('gbps', entry.get('error'))}", flush=True)
    good = [e for e in row["sweep"] if e.get("check") == "correct"]
    row["cute_best"] = max(good, key=lambda e: e["gbps"]) if good else None


# Triton cross-entropy CONFIG overrides tried by --sweep, deduplicated by the launch they give.
SWEEP_TRITON_CROSS_ENTROPY = [
    {"tile_elems": 8192},
    {"tile_elems": 16384, "elems_per_thread": 16},
    {"elems_per_thread": 16},
    {"max_warps": 8},
    {"single_block_max_n": 16384},
    {"single_block_max_n": 32768, "max_warps": 32},
    {"split_block_n": 4096},
    {"split_block_n": 4096, "split_num_warps": 16},
    {"num_stages": 2},
    {"split_programs_per_sm": 4},
    {"chunk_n": 32768},
]


def _triton_launch_key(module, m: int, n: int, config: dict, x: torch.Tensor) -> tuple:
    """Which launch the Triton cross-entropy makes under `config` (what two configs share when equal)."""
    tile = module.row_plan(m, n, config)
    if tile:
        return ("tile", *tile)
    if config["chunk_n"] > 0:
        return ("chunk", config["chunk_n"], config["split_block_n"], config["split_num_warps"], config["num_stages"])
    return ("split", *module.split_launch(m, n, config, x.element_size(), x.device), config["split_num_warps"])


def sweep_triton(
    op: str, row: dict, inputs: list, expected, reference, tol, nbytes: float, deadline: float, report: dict
) -> None:
    """The Triton cross-entropy under each SWEEP_TRITON_CROSS_ENTROPY override (its CONFIG is read at
    call time: set for the variant's calls, restored after)."""
    from triton.testing import do_bench

    row["triton_sweep"] = []
    path = KERNELS / f"{op}.py"
    try:
        module = load_module(path, f"peers_{op}_triton_module")
    except Exception as exc:
        row["triton_sweep"].append({"error": f"unavailable: {_why(exc)}"})
        return
    x, target = inputs[0], inputs[1]
    ignore_index = getattr(reference, "ignore_index", -100)
    default = dict(module.CONFIG)
    seen = {_triton_launch_key(module, *x.shape, default, x)}
    for override in SWEEP_TRITON_CROSS_ENTROPY:
        entry = {"override": override}
        try:
            key = _triton_launch_key(module, *x.shape, {**default, **override}, x)
            entry["launch"] = [str(k) for k in key]
            if key in seen:
                continue
            seen.add(key)
            if time.monotonic() > deadline:
                raise TimeoutError("not run: time budget spent")
            module.CONFIG.update(override)
            call_inputs = [t.clone() for t in inputs]
            with torch.no_grad():
                out = module.cross_entropy_forward(*call_inputs, ignore_index)
            torch.cuda.synchronize()
            problem = _compare(out, expected, tol)
            with torch.no_grad():
                ms = do_bench(lambda: module.cross_entropy_forward(*call_inputs, ignore_index))
            entry.update(ms=ms, gbps=nbytes / ms / 1e6, check=problem or "correct")
        except Exception as exc:
            entry["error"] = _why(exc)
            report["tracebacks"].append(
                f"{op} {row['shape']} triton sweep {override}:\n{traceback.format_exc()[-3000:]}"
            )
        finally:
            module.CONFIG.clear()
            module.CONFIG.update(default)
            torch.cuda.empty_cache()
        row["triton_sweep"].append(entry)
        print(f"  triton sweep {op} {row['shape']} {override} -> {entry.get('gbps', entry.get('error'))}", flush=True)
    del target
    good = [e for e in row["triton_sweep"] if e.get("check") == "correct"]
    row["triton_best"] = max(good, key=lambda e: e["gbps"]) if good else None


def ragged_checks(op: str, report: dict) -> None:
    """The CuTe kernel under its CONFIG at row counts that leave the last block part-filled."""
    module, why = _kernel_module(op)
    spec = load_spec(REPO / "specs" / f"{op}.yaml")
    tol = spec.tolerance("bfloat16")
    for m, n in ((37, 256), (3, 4096), (5, 65536)):
        name = "N" if op != "cross_entropy" else "V"
        entry = {"op": op, "shape": {"M": m, name: n}}
        try:
            if module is None:
                raise RuntimeError(why)
            torch.manual_seed(m)
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
            if op == "rmsnorm":
                w = (1 + 0.1 * torch.randn(n, device="cuda")).to(torch.bfloat16)
                out = module.rmsnorm_forward(x, w, 1e-6, None)
                xd = x.double()
                ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
            elif op == "softmax":
                out = module.softmax_forward(x, None)
                ref = torch.softmax(x.double(), -1)
            else:
                t = torch.randint(0, n, (m,), device="cuda")
                t[0] = -100
                out = module.cross_entropy_forward(x, t, -100, None)
                ref = torch.nn.functional.cross_entropy(x.double(), t, reduction="none", ignore_index=-100)
            torch.cuda.synchronize()
            entry["check"] = _compare(out, ref, tol) or "correct"
        except Exception as exc:
            entry["check"] = _why(exc)
        report["ragged"].append(entry)
        print(json.dumps(entry), flush=True)


def _compare(out: torch.Tensor, ref: torch.Tensor, tol) -> str | None:
    """None when out matches ref elementwise within the spec's tolerance; else what is wrong."""
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    o = out.double()
    bad = ~((o - ref).abs() <= tol.atol + tol.rtol * ref.abs())
    if bool(bad.any()):
        return f"{int(bad.sum())} elements outside tolerance (max abs err {float((o - ref).abs().nan_to_num(1e30).max()):.3g})"
    return None


def prepare(spec, op: str, params: dict) -> tuple:
    """One shape's reference module, dtype, reference model, inputs, float64 expected output, the
    spec's fewest bytes and its bf16 tolerance."""
    ref_mod = load_module(spec.reference, f"peers_ref_{op}", params)
    dtype = modules.dtype_of({"dtype": "bfloat16"})
    reference = modules.build_reference(ref_mod, 7, dtype, "cuda")
    inputs = modules.make_inputs(ref_mod, 8, dtype, "cuda")
    with torch.no_grad():
        wide = copy.deepcopy(reference).double()
        expected = wide(*[x.double() if x.is_floating_point() else x for x in inputs]).double()
    del wide
    nbytes, _ = spec.roofline(Case(params=params, dtype="bfloat16"))
    return ref_mod, dtype, reference, inputs, expected, nbytes, spec.tolerance("bfloat16")


def late_sweep(report: dict, deadline: float) -> None:
    """SWEEP_LATE (the mbarrier cluster exchange) at every swept shape whose plan uses a cluster,
    after everything else is recorded: a variant that hangs the GPU then costs only itself."""
    for row in report["rows"]:
        if "sweep" not in row or not any(e.get("plan", {}).get("cluster_n", 1) > 1 for e in row["sweep"]):
            continue
        if time.monotonic() > deadline:
            report["notes"].append(f"late sweep {row['op']} {row['shape']}: not run, time budget spent")
            continue
        spec = load_spec(REPO / "specs" / f"{row['op']}.yaml")
        _, _, reference, inputs, expected, nbytes, tol = prepare(spec, row["op"], row["shape"])
        sweep_cute(row["op"], row, inputs, expected, reference, tol, nbytes, deadline, report, SWEEP_LATE)
        ours = [r["gbps"] for k, r in row["results"].items() if k in ("triton", "cute") and r.get("check") == "correct"]
        ours += [row[k]["gbps"] for k in ("cute_best", "triton_best") if row.get(k)]
        peer = row["results"].get("quack", {}).get("gbps")
        row["best_ours_gbps"] = max(ours) if ours else None
        row["ours_vs_quack"] = (max(ours) / peer) if ours and peer else None
        del inputs, expected, reference
        torch.cuda.empty_cache()


def run_op(
    op: str,
    impls: list[str],
    report: dict,
    deadline: float,
    sweep_deadline: float | None = None,
    focus: str | None = None,
    rounds: int = 1,
) -> None:
    from triton.testing import do_bench

    spec = load_spec(REPO / "specs" / f"{op}.yaml")
    # Longest rows first: they are where the implementations differ, and a run may stop at its budget.
    for params in sorted(spec.shapes, key=lambda s: -max(v for v in s.values() if isinstance(v, int))):
        if time.monotonic() > deadline:
            report["notes"].append(f"{op} {params}: not run, time budget spent")
            continue
        ref_mod, dtype, reference, inputs, expected, nbytes, tol = prepare(spec, op, params)
        row = {"op": op, "shape": params, "bytes": nbytes, "results": {}}
        # The copy ceiling for this many bytes: read nbytes/2, write nbytes/2.
        src = torch.empty(int(nbytes // 2), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_ms = do_bench(lambda: dst.copy_(src))
        row["copy_gbps"] = nbytes / copy_ms / 1e6
        del src, dst
        eps = getattr(reference, "eps", 1e-6)
        ignore_index = getattr(reference, "ignore_index", -100)
        timed = []  # (impl, fn, inputs): checked, timed below in interleaved rounds
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
                row["results"][impl] = {"check": _compare(out, expected, tol) or "correct", "ms_rounds": []}
                del out
                timed.append((impl, fn, call_inputs))
            except Exception as exc:
                row["results"][impl] = {"error": _why(exc)}
                report["tracebacks"].append(f"{op} {params} {impl}:\n{traceback.format_exc()[-3000:]}")
        # Rounds interleave the implementations (a, b, c, a, b, c, ...) so that a slow spell of the
        # machine falls on all of them alike; each one's figure is the median of its round medians.
        for _ in range(rounds):
            for impl, fn, call_inputs in timed:
                entry = row["results"][impl]
                if "error" in entry:
                    continue
                try:
                    with torch.no_grad():
                        entry["ms_rounds"].append(do_bench(lambda: fn(*call_inputs)))
                except Exception as exc:
                    entry["error"] = _why(exc)
                    report["tracebacks"].append(f"{op} {params} {impl}:\n{traceback.format_exc()[-3000:]}")
        for impl, fn, call_inputs in timed:
            entry = row["results"][impl]
            if "error" in entry:
                continue
            entry["host_us"] = _host_us(fn, call_inputs)
            ms = statistics.median(entry["ms_rounds"])
            entry.update(ms=ms, gbps=nbytes / ms / 1e6, of_copy=nbytes / ms / 1e6 / row["copy_gbps"])
            entry["gbps_rounds"] = [nbytes / t / 1e6 for t in entry["ms_rounds"]]
        del timed
        torch.cuda.empty_cache()
        long_row = params.get("N", params.get("V", 0)) >= 65536
        if sweep_deadline is not None and focus == "long" and long_row:
            sweep_cute(
                op, row, inputs, expected, reference, tol, nbytes, sweep_deadline, report, SWEEP_FOCUS[op], rounds
            )
        elif sweep_deadline is not None and focus == "short" and not long_row and op in SWEEP_SHORT:
            sweep_cute(
                op, row, inputs, expected, reference, tol, nbytes, sweep_deadline, report, SWEEP_SHORT[op], rounds
            )
        elif sweep_deadline is not None and not focus:
            sweep_cute(op, row, inputs, expected, reference, tol, nbytes, sweep_deadline, report, rounds=rounds)
            if op == "cross_entropy":
                sweep_triton(op, row, inputs, expected, reference, tol, nbytes, sweep_deadline, report)
        ours = [r["gbps"] for k, r in row["results"].items() if k in ("triton", "cute") and r.get("check") == "correct"]
        ours += [row[k]["gbps"] for k in ("cute_best", "triton_best") if row.get(k)]
        peer = row["results"].get("quack", {}).get("gbps")
        row["best_ours_gbps"] = max(ours) if ours else None
        row["ours_vs_quack"] = (max(ours) / peer) if ours and peer else None
        report["rows"].append(row)
        print(
            json.dumps({k: row[k] for k in ("op", "shape", "copy_gbps", "best_ours_gbps", "ours_vs_quack")}), flush=True
        )
        del inputs, expected, reference
        torch.cuda.empty_cache()


def _host_us(fn, call_inputs: list, calls: int = 50) -> float:
    """Host time per call in microseconds: `calls` calls queued without a sync (fewer than the
    launch queue holds, so the host never waits for the GPU), then one sync outside the clock. A
    kernel shorter than this is timed by its launcher, not by the GPU."""
    torch.cuda.synchronize()
    with torch.no_grad():
        start = time.perf_counter()
        for _ in range(calls):
            fn(*call_inputs)
        host = time.perf_counter() - start
    torch.cuda.synchronize()
    return host / calls * 1e6


def markdown(report: dict) -> str:
    impls = report["implementations"]
    lines = [
        f"# Peers on {report['gpu']} (torch {report['torch']}, triton {report['triton']})",
        "",
        "GB/s from the spec's fewest-bytes expression; the copy column is a device-to-device copy of as many bytes."
        f" Each figure is the median of {report.get('rounds', 1)} interleaved do_bench medians (lowest-highest in"
        " brackets); `ours / quack`: the best correct of this project's kernels against QuACK.",
        "",
        "| op | shape | copy | " + " | ".join(impls) + " | ours / quack |",
        "| --- | --- | --- | " + " | ".join("---" for _ in impls) + " | --- |",
    ]
    for row in report["rows"]:
        cells = []
        for impl in impls:
            r = row["results"].get(impl, {})
            if "gbps" in r:
                spread = r.get("gbps_rounds", [])
                cells.append(
                    f"{r['gbps']:.0f}"
                    + (f" ({min(spread):.0f}-{max(spread):.0f})" if len(spread) > 1 else "")
                    + ("" if r["check"] == "correct" else " (wrong)")
                )
            else:
                cells.append(r.get("error", "-")[:40])
        shape = ",".join(f"{k}={v}" for k, v in row["shape"].items())
        ratio = f"{row['ours_vs_quack']:.3f}" if row.get("ours_vs_quack") else "-"
        lines.append(f"| {row['op']} | {shape} | {row['copy_gbps']:.0f} | " + " | ".join(cells) + f" | {ratio} |")
    if any("host_us" in r for row in report["rows"] for r in row["results"].values()):
        lines += [
            "",
            "Host time per call (us; a kernel shorter than this is timed by its launcher):",
            "",
            "| op | shape | " + " | ".join(impls) + " |",
            "| --- | --- | " + " | ".join("---" for _ in impls) + " |",
        ]
        for row in report["rows"]:
            shape = ",".join(f"{k}={v}" for k, v in row["shape"].items())
            cells = [f"{row['results'].get(i, {}).get('host_us', float('nan')):.1f}" for i in impls]
            lines.append(f"| {row['op']} | {shape} | " + " | ".join(cells) + " |")
    if any("sweep" in row for row in report["rows"]):
        lines += sweep_markdown(report)
    if report["unavailable"]:
        lines += ["", "Unavailable: " + "; ".join(f"{k} ({v})" for k, v in report["unavailable"].items())]
    return "\n".join(lines) + "\n"


def _plan_text(plan: dict) -> str:
    text = (
        f"cluster {plan['cluster_n']}, {plan['threads']} thr, {plan['row_threads']}/row, {plan['vecs']}x{plan['vec']}"
    )
    if plan["chunks"] > 1:
        text += f" x{plan['chunks']} chunks" + (" prefetch" if plan.get("prefetch") else "")
    text += ", mbarrier" if plan.get("mbarrier") else ""
    text += f", min {plan['min_blocks']} blocks/SM" if plan.get("min_blocks") else ""
    text += ", staged in smem" if plan.get("stage") else ""
    text += ", online" if plan.get("online") else ""
    return text + ("" if plan["bits"] == 128 else f", {plan['bits']}-bit")


def sweep_markdown(report: dict) -> list[str]:
    lines = [
        "",
        "## CuTe DSL sweep",
        "",
        "`cute` above: the kernel under its CONFIG; `cute best`: the fastest correct plan of the sweep; `triton best`:"
        " the Triton kernel, for cross-entropy the best of its CONFIG sweep.",
        "",
        "| op | shape | copy | best ours | cute best | its plan | triton best | quack | best ours / quack |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        if "sweep" not in row:
            continue
        best = row.get("cute_best")
        quack = row["results"].get("quack", {}).get("gbps")
        shape = ",".join(f"{k}={v}" for k, v in row["shape"].items())
        cells = [row["op"], shape, f"{row['copy_gbps']:.0f}"]
        cells.append(f"{row['best_ours_gbps']:.0f}" if row.get("best_ours_gbps") else "-")
        cells += [f"{best['gbps']:.0f}", _plan_text(best["plan"])] if best else ["-", "-"]
        tbest = row.get("triton_best") or row["results"].get("triton", {})
        cells.append(f"{tbest['gbps']:.0f}" if tbest.get("check") == "correct" else "-")
        cells.append(f"{quack:.0f}" if quack else "-")
        cells.append(f"{row['ours_vs_quack']:.3f}" if row.get("ours_vs_quack") else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Every plan timed (GB/s; `wrong` = outside the spec's tolerance):", ""]
    for row in report["rows"]:
        if "sweep" not in row:
            continue
        shape = ",".join(f"{k}={v}" for k, v in row["shape"].items())
        cells = []
        for e in row["sweep"]:
            label = json.dumps(e.get("override", {}), separators=(",", ":"))
            if "gbps" in e:
                cells.append(
                    f"{label} {_plan_text(e['plan'])}: {e['gbps']:.0f}"
                    + ("" if e["check"] == "correct" else " (wrong)")
                )
            else:
                cells.append(f"{label}: {e.get('error', '?')[:80]}")
        lines.append(f"- {row['op']} {shape}: " + "; ".join(cells))
        if row.get("triton_sweep"):
            cells = []
            for e in row["triton_sweep"]:
                label = json.dumps(e.get("override", {}), separators=(",", ":"))
                if "gbps" in e:
                    cells.append(f"{label}: {e['gbps']:.0f}" + ("" if e["check"] == "correct" else " (wrong)"))
                else:
                    cells.append(f"{label}: {e.get('error', '?')[:80]}")
            lines.append(f"- {row['op']} {shape}, Triton CONFIG overrides: " + "; ".join(cells))
    if report.get("ragged"):
        lines += [
            "",
            "Ragged row counts (CuTe kernels under CONFIG): "
            + "; ".join(
                f"{e['op']} {','.join(f'{k}={v}' for k, v in e['shape'].items())} {e['check']}"
                for e in report["ragged"]
            ),
        ]
    return lines


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
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="time every implementation this many times per shape, interleaved; report the median (default 3)",
    )
    ap.add_argument("--budget-s", type=float, default=600.0, help="stop starting new shapes after this long")
    ap.add_argument("--sweep", action="store_true", help="also time the CuTe kernels under the SWEEP configs per shape")
    ap.add_argument(
        "--sweep-budget-s",
        type=float,
        default=200.0,
        help="with --sweep: stop starting new sweep variants after this long",
    )
    ap.add_argument(
        "--focus",
        nargs="?",
        const="long",
        choices=("long", "short"),
        help="with --sweep: only rows of 65536 or more under SWEEP_FOCUS (`--focus` or `--focus long`), or only"
        " RMSNorm and softmax rows below that under SWEEP_SHORT (`--focus short`); no Triton sweep, no late phase",
    )
    ap.add_argument(
        "--late-budget-s", type=float, default=30.0, help="with --sweep: time for SWEEP_LATE (mbarrier) at the end"
    )
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
        "rounds": max(1, args.rounds),
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
    if args.sweep:
        report["sweep"] = {"long": SWEEP_FOCUS, "short": SWEEP_SHORT}.get(args.focus) or {
            "common": SWEEP,
            "cross_entropy": SWEEP_CROSS_ENTROPY,
        }
        report["ragged"] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    for op in args.only or OPS:
        sweep_deadline = time.monotonic() + args.sweep_budget_s if args.sweep else None
        try:
            run_op(op, args.impls, report, deadline, sweep_deadline, args.focus, max(1, args.rounds))
        except Exception as exc:  # one operator's failure (its spec, its reference) ends only that operator
            report["notes"].append(f"{op}: stopped by {_why(exc)}")
            report["tracebacks"].append(f"{op}:\n{traceback.format_exc()[-3000:]}")
        out.write_text(json.dumps(report, indent=2))
        if args.md:
            Path(args.md).write_text(markdown(report))
    if args.sweep and "cute" in args.impls:
        for op in args.only or OPS:
            ragged_checks(op, report)
        out.write_text(json.dumps(report, indent=2))
        if args.md:
            Path(args.md).write_text(markdown(report))
        if not args.focus:
            print("late sweep (mbarrier cluster exchange)", flush=True)
            late_sweep(report, time.monotonic() + args.late_budget_s)
            out.write_text(json.dumps(report, indent=2))
    if args.md:
        Path(args.md).write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
