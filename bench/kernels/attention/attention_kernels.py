"""Tune and time the attention-family reference kernels on one GPU.

    python bench/kernels/attention/attention_kernels.py --out DIR [--only flash_attention,ikbo_lce] [--deadline-s 380]
                                      [--configs sweep|default] [--no-compile]

For each kernel (knowledge_base/kernels/<name>.py) at its spec's production shapes, in bf16:
checks every swept CONFIG against an fp32 reference on fresh random inputs (output memory
poisoned with NaN first), times it with triton.testing.do_bench (median, cold L2), and times the
baselines in the same process: eager reference, torch.compile, and the hand-picked library paths
the targets are stated against (SDPA backends, bmm on a materialised input, SDPA on broadcast K/V).
Kernels are compiled first in parallel worker processes (Triton's disk cache carries them over).
Writes DIR/attention_bench.json and prints a table last.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402

from kernelevolve.spec import Case, load_spec  # noqa: E402

KEYS = {
    "flash_attention": ["BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "USE_TMA", "LAZY_RESCALE"],
    "ikbo_lce": ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "USE_TMA"],
    "ikbo_target_attention": ["BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "USE_TMA"],
}
SWEEPS = {  # around the first sweep's winners, and configs that fit 2-3 programs per SM
    # flash: 8-warp tiles and lazy rescaling around the default; all measured slower than
    # the default (bench/results/attention/h200/2026-11-23_int8_mqa_flash_tuning, through attention_bench.py --only flash)
    "flash_attention": [
        (128, 64, 4, 2, True, True),
        (128, 64, 4, 3, True, False),
        (128, 64, 4, 3, True, True),
        (128, 128, 8, 2, True, False),
        (128, 128, 8, 2, True, True),
        (128, 64, 8, 2, True, False),
        (128, 64, 8, 2, True, True),
    ],
    "ikbo_lce": [
        (128, 256, 64, 8, 4, True),
        (128, 256, 64, 8, 3, True),
        (128, 128, 64, 8, 3, True),
        (128, 128, 64, 8, 2, True),
        (128, 128, 32, 8, 4, True),
        (128, 128, 32, 8, 5, True),
        (64, 256, 32, 4, 4, True),
        (64, 256, 64, 4, 4, True),
        (128, 128, 64, 4, 3, True),
        (64, 128, 64, 4, 3, True),
        (128, 256, 32, 8, 5, True),
        (256, 128, 64, 8, 3, True),
        (128, 128, 64, 8, 4, True),
        (128, 256, 64, 8, 3, False),
    ],
    "ikbo_target_attention": [
        (64, 64, 4, 3, True),
        (64, 64, 4, 2, True),
        (64, 64, 4, 4, True),
        (64, 32, 4, 3, True),
        (64, 32, 4, 4, True),
        (128, 32, 8, 3, True),
        (64, 64, 8, 3, True),
        (128, 64, 8, 3, True),
        (128, 128, 8, 2, True),
        (256, 64, 8, 2, True),
        (64, 128, 4, 2, True),
        (64, 64, 4, 3, False),
    ],
}


def make_inputs(ref, seed: int):
    torch.manual_seed(seed)
    out = []
    for x in ref.get_inputs():
        x = x.cuda()
        out.append(x.to(torch.bfloat16) if x.is_floating_point() else x)
    return out


def fp32_reference(ref, inputs):
    model = ref.Model(*ref.get_init_inputs()).cuda()
    with torch.no_grad():
        return model(*[x.float() if x.is_floating_point() else x for x in inputs]).float()


def poison_allocator(nbytes: int) -> None:
    # The caching allocator hands the freed NaN block to the kernel's torch.empty: unwritten output shows up.
    block = torch.full((nbytes // 4 + 1,), float("nan"), device="cuda")
    del block


def check(out, expected, tol) -> dict:
    out = out.float()
    err = (out - expected).abs()
    finite = bool(torch.isfinite(out).all())
    rel_l2 = float(torch.linalg.vector_norm(out - expected) / torch.linalg.vector_norm(expected))
    ok = finite and bool((err <= tol.atol + tol.rtol * expected.abs()).all())
    return {"ok": ok, "max_abs_err": float(err.max()) if finite else float("nan"), "rel_l2_err": rel_l2}


def bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))


def baselines(name: str, ref, inputs, params: dict, allow_compile: bool, deadline: float) -> dict:
    model = ref.Model(*ref.get_init_inputs()).cuda()
    out = {}
    with torch.no_grad():
        out["eager"] = bench(lambda: model(*inputs))
        if name == "flash_attention":
            from torch.nn.attention import SDPBackend, sdpa_kernel

            causal = bool(params.get("CAUSAL", 0))
            for label, backend in (
                ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION),
            ):
                try:
                    with sdpa_kernel([backend]):
                        out[label] = bench(lambda: F.scaled_dot_product_attention(*inputs, is_causal=causal))
                except Exception as exc:  # a backend may refuse the shape or be missing from the build
                    out[label] = f"unavailable: {type(exc).__name__}"
        elif name == "ikbo_lce":
            user_emb, cand_emb, uid, weight = inputs
            x = torch.cat([user_emb[uid], cand_emb], dim=1)
            out["bmm_on_materialised_input"] = bench(lambda: torch.matmul(weight, x))
            del x
        elif name == "ikbo_target_attention":
            q, k, v, uid = inputs
            kb, vb = k[uid], v[uid]
            out["sdpa_on_broadcast_kv"] = bench(lambda: F.scaled_dot_product_attention(q, kb, vb))
            del kb, vb
        if allow_compile and time.time() < deadline - 90:
            compiled = torch.compile(model)
            t0 = time.time()
            compiled(*inputs)
            torch.cuda.synchronize()
            out["torch.compile"] = bench(lambda: compiled(*inputs))
            out["torch.compile_build_s"] = round(time.time() - t0, 1)
    return out


def kernel_breakdown(model, inputs, reps: int = 20) -> dict:
    """Mean device time per launched kernel (torch.profiler) for one forward: where the time goes."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with torch.no_grad():
            model(*inputs)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    model(*inputs)
                torch.cuda.synchronize()
        out = {}
        for event in prof.key_averages():
            total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
            if total:
                out[event.key[:80]] = round(total / reps, 2)
        return out
    except Exception as exc:  # the profiler is informative only
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def config_list(name: str, module, which: str) -> list[dict]:
    if which == "default":
        return [dict(module.CONFIG)]
    configs = [dict(zip(KEYS[name], values)) for values in SWEEPS[name]]
    if dict(module.CONFIG) not in configs:
        configs.insert(0, dict(module.CONFIG))
    return configs


def warm(names: list[str], which: str, shard: int, shards: int) -> None:
    """Compile this shard's share of (kernel, shape, config) by running each once."""
    jobs = []
    for name in names:
        spec = load_spec(REPO / "specs" / f"{name}.yaml")
        kernel = load_module(KERNELS / f"{name}.py", f"kb_{name}")
        for case in spec.cases("cuda"):
            for cfg in config_list(name, kernel, which):
                jobs.append((name, spec, kernel, case, cfg))
    for i, (name, spec, kernel, case, cfg) in enumerate(jobs):
        if i % shards != shard:
            continue
        ref = load_module(spec.reference, f"ref_{name}", case.params)
        inputs = make_inputs(ref, 0)
        kernel.CONFIG.update(cfg)
        try:
            kernel.ModelNew(*ref.get_init_inputs()).cuda()(*inputs)
            torch.cuda.synchronize()
        except Exception as exc:
            print(f"warm: {name} {cfg}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)


def run_kernel(name: str, which: str, allow_compile: bool, deadline: float) -> dict:
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    kernel = load_module(KERNELS / f"{name}.py", f"kb_{name}")
    default = dict(kernel.CONFIG)
    result = {"spec": name, "default_config": default, "shapes": []}
    for case in spec.cases("cuda"):
        ref = load_module(spec.reference, f"ref_{name}", case.params)
        tol = spec.tolerance(case.dtype)
        nbytes, flops = spec.roofline(Case(params=case.params, dtype=case.dtype))
        inputs = make_inputs(ref, 1)
        expected = fp32_reference(ref, inputs)
        shape = {"params": case.params, "dtype": case.dtype, "bytes": nbytes, "flops": flops, "configs": []}
        model_new = None
        for cfg in config_list(name, kernel, which):
            if time.time() > deadline:
                shape["configs"].append({"config": cfg, "skipped": "deadline"})
                continue
            kernel.CONFIG.clear()
            kernel.CONFIG.update(cfg)
            row = {"config": cfg}
            try:
                model_new = kernel.ModelNew(*ref.get_init_inputs()).cuda()
                with torch.no_grad():
                    poison_allocator(expected.numel() * 2)
                    row.update(check(model_new(*inputs), expected, tol))
                    fresh = make_inputs(ref, 2)  # a second draw: same function on any input
                    second = check(model_new(*fresh), fp32_reference(ref, fresh), tol)
                    row["ok"] = row["ok"] and second["ok"]
                    row["max_abs_err"] = max(row["max_abs_err"], second["max_abs_err"])
                    del fresh
                    row["ms"] = bench(lambda: model_new(*inputs))
                row["tflops"] = flops / row["ms"] / 1e9 if flops else None
                row["gbps"] = nbytes / row["ms"] / 1e6 if nbytes else None
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            shape["configs"].append(row)
            print(f"{name} {case.params} {cfg} -> {row.get('ms', row.get('error'))} ok={row.get('ok')}", flush=True)
        kernel.CONFIG.clear()
        kernel.CONFIG.update(default)
        timed = [r for r in shape["configs"] if r.get("ok") and "ms" in r]
        shape["best"] = min(timed, key=lambda r: r["ms"]) if timed else None
        shape["default"] = next((r for r in shape["configs"] if r["config"] == default), None)
        shape["default_kernels_us"] = kernel_breakdown(kernel.ModelNew(*ref.get_init_inputs()).cuda(), inputs)
        shape["baselines_ms"] = baselines(name, ref, inputs, case.params, allow_compile, deadline)
        result["shapes"].append(shape)
        del inputs, expected
        torch.cuda.empty_cache()
    return result


def table(results: list[dict]) -> str:
    lines = [
        "| kernel | shape | default ms | best ms | best TFLOP/s | best config | baselines ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for shape in res["shapes"]:
            label = ",".join(f"{k}={v}" for k, v in shape["params"].items())
            default, best = shape.get("default") or {}, shape.get("best") or {}
            base = ", ".join(
                f"{k} {v:.3f}"
                for k, v in shape["baselines_ms"].items()
                if isinstance(v, float) and not k.endswith("_s")
            )
            cells = [
                res["spec"],
                label,
                f"{default['ms']:.3f}" if "ms" in default else "-",
                f"{best['ms']:.3f}" if "ms" in best else "-",
                f"{best['tflops']:.0f}" if best.get("tflops") else "-",
                str(best.get("config", "-")),
                base,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--only", default="flash_attention,ikbo_lce,ikbo_target_attention")
    parser.add_argument("--configs", choices=["sweep", "default"], default="sweep")
    parser.add_argument("--deadline-s", type=float, default=380.0)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baselines")
    parser.add_argument("--warm-workers", type=int, default=12)
    parser.add_argument("--warm-shard", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.only.split(",")
    if args.warm_shard is not None:
        shard, shards = (int(x) for x in args.warm_shard.split("/"))
        warm(names, args.configs, shard, shards)
        return
    start = time.time()
    deadline = start + args.deadline_s
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references stay fp32
    torch.backends.cudnn.allow_tf32 = False
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--only",
                args.only,
                "--configs",
                args.configs,
                "--warm-shard",
                f"{i}/{args.warm_workers}",
            ]
        )
        for i in range(args.warm_workers)
    ]
    for proc in workers:
        try:
            proc.wait(timeout=max(1.0, min(120.0, deadline - 150 - time.time())))
        except subprocess.TimeoutExpired:
            proc.kill()
    warm_s = time.time() - start
    results = []
    out_path = Path(args.out) / "attention_bench.json"
    env = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "warm_compile_s": round(warm_s, 1),
        "command": " ".join(sys.argv),
    }
    for name in names:
        results.append(run_kernel(name, args.configs, not args.no_compile, deadline))
        out_path.write_text(json.dumps({"environment": env, "results": results}, indent=1))
    env["total_s"] = round(time.time() - start, 1)
    out_path.write_text(json.dumps({"environment": env, "results": results}, indent=1))
    print(json.dumps(env))
    print(table(results))


if __name__ == "__main__":
    main()
