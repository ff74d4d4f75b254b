"""Time the block-diagonal, int8 MQA and flash attention kernels against the baselines a user would run.

    python bench/kernels/attention/attention_bench.py --out FILE.json [--only block_diag:1,block_diag_bwd,decode,prefill,flash]
                                    [--configs default|sweep] [--deadline-s 200] [--no-reference]
                                    [--warm-workers 12] [--smoke]

At the specs' production shapes, in bf16 on one GPU (triton.testing.do_bench, median, L2 flushed):
- block_diag_attention (forward), D = 128 and 64: the kernel against flex_attention compiled with
  the spec's block mask (mask prebuilt, and the spec's reference, which builds it every call), and
  SDPA with a dense boolean mask on the batch padded to its longest sequence (padding not timed).
- block_diag_attention_bwd: the kernel against the backward of the same two (autograd.grad on a kept
  forward graph: the backward alone), and the reference's whole forward + backward.
- int8_mqa_decode / int8_mqa_prefill: the kernel against the spec's reference (dequantise to bf16,
  then SDPA with enable_gqa; eager and torch.compile) and SDPA on an already dequantised bf16 cache.
- flash_attention: the kernel against SDPA (default dispatch, and the cuDNN, flash and efficient backends).
--warm-workers N compiles the int8/flash sweeps in N processes first (Triton's disk cache keeps them);
--smoke runs the sweeps under the Triton interpreter on the CPU at the specs' interpret_shapes, checks only.
Every kernel configuration is checked first against the float32 exact computation (outputs
poisoned with NaN beforehand); a wrong one is reported and not timed. Each entry gives ms, GB/s
(the spec's byte count; for decode also the int8 KV cache alone) and TFLOP/s (useful FLOPs: only
the 64 x 64 blocks' real rows and columns for block-diagonal attention).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if "--smoke" in sys.argv:  # before triton is imported
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402

from benchlib import one_knob_moves  # noqa: E402
from kernelevolve.spec import Case, load_spec  # noqa: E402

BLOCK_DIAG = (
    "block_diag_attention",
    "block_diag_attention_bwd",
    "block_diag_attention_rope",
    "block_diag_attention_rope_bwd",
)
# --configs sweep, each configuration over the kernel file's CONFIG.
SWEEPS = {
    # The block-diagonal kernels: the default, then each knob moved alone to every other value of the kernel's TUNABLES.
    **{name: [{}, *one_knob_moves(name)] for name in BLOCK_DIAG},
    # The tl decode kernel's default (CONVERT auto, BLOCK_N 128, PROGRAMS_PER_SM 1, 4 warps, 3 stages) through
    # the cached direct launch and through the JIT, and the previous default. The sweeps that chose it (tile
    # sizes, warps, stages, programs per SM, cast / v_asm / f16, WARP_SPLIT, V_IN_REGS) are in
    # bench/results/int8_mqa_decode/h200/2026-11-23_split_kv_tl_kernel/decode_sweep.json and decode_call2.json.
    "int8_mqa_decode": [
        dict(LAUNCH="cached"),
        dict(LAUNCH="jit"),
        dict(CONVERT="cast", BLOCK_N=128, PROGRAMS_PER_SM=1, num_warps=4, num_stages=3, LAUNCH="jit"),
    ],
    # Prefill and flash: the defaults first, then the warp-specialised Gluon kernel:
    # PERSISTENT 2 (one loop over all of a program's tiles, the pipeline running across blocks) or 1 (a
    # loop of blocks) or 0, with or without PINGPONG (the consumer warpgroups taking turns issuing wgmma).
    # The earlier sweeps and results: bench/results/flash_attention/h200/2026-11-23_gluon_prefill_tuning/.
    "int8_mqa_prefill": [
        {},
        *(
            {"DEQUANT": "prepass", "IMPL": "gluon", "HOPPER_WS": True, "HOPPER_BLOCK_N": 128, "HOPPER_STAGES": 2}
            | {"HOPPER_PERSISTENT": p, "HOPPER_PINGPONG": pp}
            for p, pp in ((2, True), (2, False), (1, True), (0, True))
        ),
    ],
    "flash_attention": [
        {},
        *(
            {"IMPL": "gluon", "HOPPER_WS": True, "HOPPER_BLOCK_N": 128, "HOPPER_STAGES": 2}
            | {"HOPPER_PERSISTENT": p, "HOPPER_PINGPONG": pp}
            for p, pp in ((2, True), (2, False), (1, True), (0, True))
        ),
    ],
}
ALIASES = {
    "flash": "flash_attention",
    "block_diag_rope": "block_diag_attention_rope",
    "block_diag_rope_bwd": "block_diag_attention_rope_bwd",
    "block_diag": "block_diag_attention",
    "block_diag_bwd": "block_diag_attention_bwd",
    "decode": "int8_mqa_decode",
    "prefill": "int8_mqa_prefill",
}


# --smoke: under the Triton interpreter on the CPU at the specs' interpret_shapes, every swept
# configuration checked against the exact reference, nothing timed (a check of the sweep itself).
SMOKE = "--smoke" in sys.argv
DEVICE = "cpu" if SMOKE else "cuda"


def empty_cache() -> None:
    if not SMOKE:
        torch.cuda.empty_cache()


def bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def cuda_inputs(ref, seed: int = 0) -> list:
    torch.manual_seed(seed)
    with torch.device(DEVICE):
        xs = ref.get_inputs()
    return [x.to(DEVICE).to(torch.bfloat16) if x.is_floating_point() else x.to(DEVICE) for x in xs]


def poisoned(fn):
    """Run fn with every fresh allocation NaN-filled first: an unwritten output element shows."""
    if SMOKE:
        return fn()
    junk = torch.empty(int(torch.cuda.mem_get_info()[0] * 0.3) // 4, dtype=torch.float32, device="cuda")
    junk.fill_(float("nan"))
    del junk
    return fn()


def error_of(outs, refs, tol) -> dict:
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    refs = refs if isinstance(refs, (list, tuple)) else [refs]
    worst, ok = 0.0, True
    for out, ref in zip(outs, refs):
        diff = (out.float() - ref.float()).abs()
        worst = max(worst, diff.max().item())
        ok = ok and bool(torch.isfinite(out).all()) and bool((diff <= tol.atol + tol.rtol * ref.float().abs()).all())
    return {"correct": ok, "max_abs_err": worst}


def rates(ms: float, nbytes: float, flops: float, extra: dict | None = None) -> dict:
    out = {"ms": round(ms, 5), "GB/s": round(nbytes / ms / 1e6, 1), "TFLOP/s": round(flops / ms / 1e9, 2)}
    for key, value in (extra or {}).items():
        out[key] = round(value / ms / 1e6, 1)
    return out


def timed(base: dict, key: str, fn, nbytes: float, flops: float) -> None:
    """base[key] = fn's rates, or base[key + "_error"] = why it could not run."""
    try:
        base[key] = rates(bench(fn), nbytes, flops)
    except Exception as exc:
        base[key + "_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    torch.cuda.empty_cache()


def kernel_runs(
    name: str, kernel, xs, init, expected, tol, which: str, nbytes, flops, extra=None
) -> tuple[list, dict | None]:
    """Each configuration checked, then timed; (entries, the fastest correct one)."""
    configs = SWEEPS[name] if which == "sweep" else [dict(kernel.CONFIG)]
    defaults = dict(kernel.CONFIG)
    entries, best = [], None
    for config in configs:
        kernel.CONFIG.clear()
        kernel.CONFIG.update(defaults, **config)  # each configuration over the file's defaults
        model = kernel.ModelNew(*init)
        entry = {"config": dict(kernel.CONFIG)}
        try:
            entry.update(error_of(poisoned(lambda: model(*xs)), expected, tol))
            if entry["correct"] and not SMOKE:
                entry.update(rates(bench(lambda: model(*xs)), nbytes, flops, extra))
        except Exception as exc:  # a configuration that does not compile or run is reported, not fatal
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        entries.append(entry)
        if entry.get("ms") is not None and (best is None or entry["ms"] < best["ms"]):
            best = entry
        print(f"  {name} {json.dumps(entry)}", flush=True)
        empty_cache()
    kernel.CONFIG.clear()
    kernel.CONFIG.update(defaults)
    return entries, best


# -- block-diagonal attention --------------------------------------------------------------------
def rope_of(ref, offsets: torch.Tensor, compiled: bool = False):
    """(q, k) -> [q, k] rotated as the spec's reference does, or unchanged for a spec without RoPE."""
    rotary = getattr(ref, "rotary", None)
    fn = torch.compile(rotary) if (rotary and compiled) else rotary

    def apply(q, k):
        return [q, k] if fn is None else [fn(q, offsets, ref.ROPE_BASE), fn(k, offsets, ref.ROPE_BASE)]

    apply.identity = rotary is None
    return apply


def block_sizes(offsets: torch.Tensor) -> torch.Tensor:
    """The row count of every 64-token block (64, or a sequence's remainder)."""
    lengths = (offsets[1:] - offsets[:-1]).cpu()
    full = torch.full((int((lengths // 64).sum()),), 64)
    return torch.cat([full, lengths[lengths % 64 > 0] % 64]).double()


def padded(t: torch.Tensor, offsets: torch.Tensor, max_len: int) -> torch.Tensor:
    """[TOKENS, H, D] -> [B, H, max_len, D] zero-padded (what SDPA needs)."""
    lengths = (offsets[1:] - offsets[:-1]).tolist()
    out = t.new_zeros(len(lengths), max_len, *t.shape[1:])
    for b, (start, n) in enumerate(zip(offsets[:-1].tolist(), lengths)):
        out[b, :n] = t[start : start + n]
    return out.transpose(1, 2)


def dense_block_mask(offsets: torch.Tensor, max_len: int) -> torch.Tensor:
    """[B, 1, max_len, max_len] bool: same 64-token block of a real row; padded rows see only themselves
    (no NaN rows for SDPA; their outputs are discarded)."""
    lengths = (offsets[1:] - offsets[:-1]).to("cuda")
    pos = torch.arange(max_len, device="cuda")
    real = pos[None, :] < lengths[:, None]
    same = (pos[:, None] // 64) == (pos[None, :] // 64)
    mask = same[None] & real[:, None, :] & real[:, :, None]
    mask |= torch.eye(max_len, dtype=torch.bool, device="cuda")[None] & ~real[:, :, None]
    return mask[:, None]


def run_block_diag(name: str, which: str, deadline: float, max_shapes: int | None, with_reference: bool) -> list:
    backward = name.endswith("_bwd")
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    tol = spec.tolerance("bfloat16")
    results = []
    for params in spec.shapes[:max_shapes]:
        if time.time() > deadline:
            results.append({"params": params, "skipped": "deadline"})
            continue
        ref = load_module(spec.reference, f"ref_{name}", params)
        kernel = load_module(KERNELS / f"{name}.py", f"kernel_{name}")
        xs = cuda_inputs(ref)
        q, k, v, offsets = xs[0], xs[1], xs[2], xs[-1]
        tokens, heads, dim = q.shape
        sizes = block_sizes(offsets)
        useful = (10 if backward else 4) * heads * dim * float((sizes**2).sum())
        nbytes = spec.roofline(Case(params=params, dtype="bfloat16"))[0]
        entry = {"params": params, "tokens": tokens, "blocks": int(len(sizes)), "useful_flops": useful}
        # The exact computation in float32 (gathered blocks) as the correctness reference.
        leaves = [t.float().requires_grad_(backward) for t in (q, k, v)]
        with torch.enable_grad():
            rotated = rope_of(ref, offsets)(*leaves[:2]) + leaves[2:]
            exact = ref.exact_block_attention(*rotated, offsets, 64)
            expected = torch.autograd.grad(exact, leaves, xs[3].float()) if backward else exact.detach()
        del exact, leaves
        entry["kernel"], best = kernel_runs(name, kernel, xs, [], expected, tol, which, nbytes, useful)
        # flex_attention compiled with the spec's block mask, prebuilt: on [1, H, TOKENS, D] views of the
        # packed tensors (as the reference), and on contiguous copies (the copies not timed).
        base = {}
        from torch.nn.attention.flex_attention import flex_attention

        # Timing the backward alone replays it on one kept graph (retain_graph), which compiled
        # backwards with donated buffers refuse.
        import torch._functorch.config as functorch_config

        functorch_config.donated_buffer = False
        flex = torch.compile(flex_attention)
        rope = rope_of(ref, offsets, compiled=True)  # with RoPE: the rotation is part of the timed call
        for layout in ("views", "contiguous") if rope.identity else ("views",):
            tag = f"flex_block_mask_compiled_{layout}"
            try:
                mask = ref.flex_block_mask(offsets, 64, tokens)
                view = [t.transpose(0, 1).unsqueeze(0) for t in (*rope(q, k), v)]
                if layout == "contiguous":
                    view = [t.contiguous() for t in view]
                if backward:
                    do = xs[3].transpose(0, 1).unsqueeze(0)
                    do = do.contiguous() if layout == "contiguous" else do
                    if rope.identity:
                        leaves = [t.detach().requires_grad_() for t in view]
                        out = flex(*leaves, block_mask=mask)
                        grads = torch.autograd.grad(out, leaves, do, retain_graph=True)
                        grads = [g.squeeze(0).transpose(0, 1) for g in grads]
                    else:  # gradients with respect to the unrotated q, k: the rotation is in the graph
                        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                        rotated = [t.transpose(0, 1).unsqueeze(0) for t in (*rope(*leaves[:2]), leaves[2])]
                        out = flex(*rotated, block_mask=mask)
                        grads = torch.autograd.grad(out, leaves, do, retain_graph=True)
                    base[tag + "_check"] = error_of(grads, expected, tol)
                    del grads
                    ms = bench(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True))
                    del out, leaves
                else:
                    with torch.no_grad():
                        flex_out = flex(*view, block_mask=mask).squeeze(0).transpose(0, 1)
                        base[tag + "_check"] = error_of(flex_out, expected, tol)
                        del flex_out
                        if rope.identity:
                            ms = bench(lambda: flex(*view, block_mask=mask))
                        else:  # the rotation is timed too: the kernel does it
                            rotated = lambda: [t.transpose(0, 1).unsqueeze(0) for t in rope(q, k)]  # noqa: E731
                            ms = bench(lambda: flex(*rotated(), view[2], block_mask=mask))
                base[tag] = rates(ms, nbytes, useful)
            except Exception as exc:
                base[tag + "_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            torch.cuda.empty_cache()
        # The spec's baseline: the reference under torch.compile, building the mask every call.
        if with_reference:
            model = torch.compile(ref.Model())
            key = "reference_compiled_fwd_bwd" if backward else "reference_compiled"
            with torch.no_grad():
                timed(base, key, lambda: model(*xs), nbytes, useful)
        # SDPA with a dense mask on the batch padded to its longest sequence.
        try:
            max_len = -(-int((offsets[1:] - offsets[:-1]).max()) // 64) * 64  # whole blocks, aligned rows
            mask = dense_block_mask(offsets, max_len)
            pq, pk, pv = (padded(t, offsets, max_len) for t in (*rope(q, k), v))  # rotation not timed
            if backward:
                leaves = [t.detach().requires_grad_() for t in (pq, pk, pv)]
                out = F.scaled_dot_product_attention(*leaves, attn_mask=mask)
                pdo = padded(xs[3], offsets, max_len)
                ms = bench(lambda: torch.autograd.grad(out, leaves, pdo, retain_graph=True))
                del out, leaves
            else:
                with torch.no_grad():
                    ms = bench(lambda: F.scaled_dot_product_attention(pq, pk, pv, attn_mask=mask))
            base["sdpa_dense_mask_padded"] = rates(ms, nbytes, useful)
            base["sdpa_padded_len"] = max_len
            del mask, pq, pk, pv
        except Exception as exc:
            base["sdpa_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        entry["baselines"] = base
        if best:
            for key, b in base.items():
                if isinstance(b, dict) and "ms" in b:
                    entry.setdefault("speedup", {})[key] = round(b["ms"] / best["ms"], 3)
        results.append(entry)
        del xs, q, k, v, expected
        torch.cuda.empty_cache()
    return results


# -- compile workers ------------------------------------------------------------------------------
WARM = None  # (shard, shards) in a compile worker
_warm_counter = [0]


def warm_configs(name: str, kernel, xs, init) -> None:
    """This worker's share of (shape, configuration) pairs, each run once so that it compiles."""
    defaults = dict(kernel.CONFIG)
    for config in SWEEPS[name]:
        index = _warm_counter[0]
        _warm_counter[0] += 1
        if index % WARM[1] != WARM[0]:
            continue
        kernel.CONFIG.clear()
        kernel.CONFIG.update(defaults, **config)
        try:
            with torch.no_grad():
                kernel.ModelNew(*init)(*xs)
            torch.cuda.synchronize()
        except Exception as exc:  # reported again, with its error, by the measuring process
            print(f"warm: {name} {config}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
    kernel.CONFIG.clear()
    kernel.CONFIG.update(defaults)


def compile_in_parallel(only: str, workers: int, budget_s: float) -> float:
    """Compile every swept configuration in `workers` processes first (the int8 and flash kernels)."""
    import subprocess

    start = time.time()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--out",
                "/dev/null",
                "--only",
                only,
                "--configs",
                "sweep",
                "--warm-shard",
                f"{i}/{workers}",
            ]
        )
        for i in range(workers)
    ]
    for proc in procs:
        try:
            proc.wait(timeout=max(1.0, budget_s - (time.time() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
    return round(time.time() - start, 1)


# -- int8 MQA ------------------------------------------------------------------------------------
FLUSH_BYTES = 256 << 20  # above the H200's 50 MB L2, as do_bench's flush


def graph_us(fn, n: int = 20, reps: int = 5, flush_by: str = "write") -> tuple[float, object]:
    """Device time of one call as a CUDA graph runs it (how decode is served: no host time), L2
    flushed before each call: a graph of n (flush, call) pairs minus a graph of n flushes, per call,
    median over reps replays. Also returns the last captured call's output (to be checked).
    flush_by "write" zeroes 256 MB (do_bench's flush: the call then starts with an L2 full of dirty
    lines to write back); "read" reads 256 MB (the call starts with an L2 of clean, unrelated lines,
    as after a kernel that only read, e.g. a projection's weights)."""
    if flush_by not in ("write", "read"):
        raise ValueError(f"graph_us: flush_by is 'write' or 'read', not {flush_by!r}")
    flush = torch.zeros(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def evict() -> None:
        if flush_by == "write":
            flush.zero_()
        else:
            flush.max()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        evict()
    torch.cuda.current_stream().wait_stream(side)
    both, flushes = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(both):
        for _ in range(n):
            evict()
            out = fn()
    with torch.cuda.graph(flushes):
        for _ in range(n):
            evict()

    def replay_ms(graph) -> float:
        times = []
        for _ in range(reps + 1):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times[1:])[reps // 2]

    us = (replay_ms(both) - replay_ms(flushes)) / n * 1e3
    del both, flushes, flush
    return us, out


def host_us(fn, n: int = 50) -> float:
    """Host time per call (Python launcher + launch), calls queued back to back without waiting."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    us = (time.perf_counter() - start) / n * 1e6
    torch.cuda.synchronize()
    return us


def decode_timings(kernel, init, xs, entries, expected, tol, kv_bytes) -> None:
    """Per decode configuration: graph_us (device time in a CUDA graph, L2 flushed), host_us, and a
    second check of the output of the timed path (the cached launch) and of the graph's replay."""
    defaults = dict(kernel.CONFIG)
    for entry in entries:
        if entry.get("ms") is None:
            continue
        kernel.CONFIG.clear()
        kernel.CONFIG.update(entry["config"])
        model = kernel.ModelNew(*init)
        try:
            with torch.no_grad():
                entry["recheck"] = error_of(poisoned(lambda: model(*xs)), expected, tol)
                us, out = graph_us(lambda: model(*xs))
                entry["graph_check"] = error_of(out, expected, tol)
                entry["graph_us"] = round(us, 2)
                entry["graph_KV_GB/s"] = round(kv_bytes / us / 1e3, 1)
                entry["host_us"] = round(host_us(lambda: model(*xs)), 2)
                if getattr(kernel, "DIRECT_LAUNCH_ERROR", None):
                    entry["direct_launch_error"] = kernel.DIRECT_LAUNCH_ERROR[:300]
        except Exception as exc:
            entry["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(f"  decode graph {json.dumps({k: entry.get(k) for k in ('graph_us', 'host_us', 'ms')})}", flush=True)
        torch.cuda.empty_cache()
    kernel.CONFIG.clear()
    kernel.CONFIG.update(defaults)


def run_int8(name: str, which: str, deadline: float, max_shapes: int | None, with_reference: bool) -> list:
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    tol = spec.tolerance("bfloat16")
    results = []
    for params in (spec.interpret_shapes if SMOKE else spec.shapes)[:max_shapes]:
        if time.time() > deadline:
            results.append({"params": params, "skipped": "deadline"})
            continue
        ref = load_module(spec.reference, f"ref_{name}", params)
        kernel = load_module(KERNELS / f"{name}.py", f"kernel_{name}")
        xs = cuda_inputs(ref)
        q, kc, ks, vc, vs = xs
        if WARM is not None:  # a compile worker: run each configuration once (Triton's disk cache keeps it)
            warm_configs(name, kernel, xs, ref.get_init_inputs())
            continue
        init = ref.get_init_inputs()
        nbytes, flops = spec.roofline(Case(params=params, dtype="bfloat16"))
        kv_bytes = 2 * kc.numel() + 2 * ks.numel() * ks.element_size()
        with torch.no_grad():
            wide = torch.float64 if SMOKE else torch.float32
            expected = ref.Model(*init)(q.to(wide), kc, ks.to(wide), vc, vs.to(wide))
        entry = {"params": params}
        extra = {"KV GB/s": kv_bytes}
        entry["kernel"], best = kernel_runs(name, kernel, xs, init, expected, tol, which, nbytes, flops, extra)
        if SMOKE:
            results.append(entry)
            continue
        if name == "int8_mqa_decode":
            decode_timings(kernel, init, xs, entry["kernel"], expected, tol, kv_bytes)
            timed_graph = [e for e in entry["kernel"] if e.get("graph_us") and e.get("graph_check", {}).get("correct")]
            if timed_graph:
                entry["best_graph"] = min(timed_graph, key=lambda e: e["graph_us"])
        if best is not None:  # device time per launched kernel of the fastest configuration (torch.profiler)
            from attention_kernels import kernel_breakdown

            defaults = dict(kernel.CONFIG)
            kernel.CONFIG.update(best["config"])
            entry["best_kernels_us"] = kernel_breakdown(kernel.ModelNew(*init), xs)
            kernel.CONFIG.clear()
            kernel.CONFIG.update(defaults)
        base = {}
        model = ref.Model(*init)
        causal = bool(init[0]) if init else False
        with torch.no_grad():
            timed(base, "reference_eager_dequant_sdpa", lambda: model(*xs), nbytes, flops)
            if with_reference:
                compiled = torch.compile(model)
                timed(base, "reference_compiled_dequant_sdpa", lambda: compiled(*xs), nbytes, flops)
            k = ref.dequantize(kc, ks, torch.bfloat16).unsqueeze(1)
            v = ref.dequantize(vc, vs, torch.bfloat16).unsqueeze(1)
            bf16_bytes = nbytes + 2 * k.numel()  # bf16 K/V read instead of int8
            gqa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)  # noqa: E731
            timed(base, "sdpa_bf16_predequantised_gqa", gqa, bf16_bytes, flops)
            if name == "int8_mqa_decode":  # the same graph timing as the kernel's configurations
                try:
                    base["sdpa_bf16_predequantised_gqa_graph_us"] = round(graph_us(gqa)[0], 2)
                    base["reference_eager_dequant_sdpa_graph_us"] = round(graph_us(lambda: model(*xs))[0], 2)
                except Exception as exc:
                    base["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            ke, ve = (t.expand(-1, q.shape[1], -1, -1) for t in (k, v))
            expanded = lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)  # noqa: E731
            timed(base, "sdpa_bf16_predequantised_expanded", expanded, bf16_bytes, flops)
        entry["baselines"] = base
        if best:
            entry["speedup"] = {
                key: round(b["ms"] / best["ms"], 3) for key, b in base.items() if isinstance(b, dict) and "ms" in b
            }
        results.append(entry)
        del xs, expected
        torch.cuda.empty_cache()
    return results


# -- flash attention ------------------------------------------------------------------------------
def run_flash(name: str, which: str, deadline: float, max_shapes: int | None) -> list:
    """The flash-attention kernel's configurations against SDPA (default dispatch and each backend)."""
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    tol = spec.tolerance("bfloat16")
    results = []
    for params in (spec.interpret_shapes if SMOKE else spec.shapes)[:max_shapes]:
        if time.time() > deadline:
            results.append({"params": params, "skipped": "deadline"})
            continue
        ref = load_module(spec.reference, f"ref_{name}", params)
        kernel = load_module(KERNELS / f"{name}.py", f"kernel_{name}")
        xs = cuda_inputs(ref)
        init = ref.get_init_inputs()
        if WARM is not None:
            warm_configs(name, kernel, xs, init)
            continue
        nbytes, flops = spec.roofline(Case(params=params, dtype="bfloat16"))
        with torch.no_grad():
            wide = torch.float64 if SMOKE else torch.float32
            expected = ref.Model(*init)(*[x.to(wide) for x in xs])
        entry = {"params": params}
        entry["kernel"], best = kernel_runs(name, kernel, xs, init, expected, tol, which, nbytes, flops)
        if SMOKE:
            results.append(entry)
            continue
        from torch.nn.attention import SDPBackend, sdpa_kernel

        causal = bool(init[0]) if init else False
        base = {}
        with torch.no_grad():
            timed(base, "sdpa_default", lambda: F.scaled_dot_product_attention(*xs, is_causal=causal), nbytes, flops)
            for label, backend in (
                ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION),
            ):
                with sdpa_kernel([backend]):
                    timed(base, label, lambda: F.scaled_dot_product_attention(*xs, is_causal=causal), nbytes, flops)
        entry["baselines"] = base
        if best:
            entry["speedup"] = {
                key: round(b["ms"] / best["ms"], 3) for key, b in base.items() if isinstance(b, dict) and "ms" in b
            }
        results.append(entry)
        del xs, expected
        torch.cuda.empty_cache()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument(
        "--only", default="block_diag,block_diag_bwd,decode,prefill", help="NAME[:N] list (N: first N shapes)"
    )
    parser.add_argument("--configs", choices=["default", "sweep"], default="default")
    parser.add_argument("--deadline-s", type=float, default=200.0, help="start no new shape after this many seconds")
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the spec's compiled reference (kernelevolve eval times it)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="CPU interpreter at the specs' interpret_shapes: checks only, no timing"
    )
    parser.add_argument(
        "--warm-workers", type=int, default=0, help="compile the int8/flash sweeps in this many processes first"
    )
    parser.add_argument("--warm-shard", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global WARM
    if args.smoke:
        from kernelevolve.evaluation.interpreter_compat import patch_triton_interpreter

        patch_triton_interpreter()
    elif not torch.cuda.is_available():
        sys.exit("attention_bench: needs a CUDA GPU")
    int8_only = ",".join(
        i for i in args.only.split(",") if ALIASES.get(i.partition(":")[0], i).startswith(("int8_mqa", "flash"))
    )
    if args.warm_shard is not None:
        WARM = tuple(int(x) for x in args.warm_shard.split("/"))
        for item in int8_only.split(","):
            short, _, count = item.partition(":")
            name = ALIASES.get(short, short)
            run = run_flash if name == "flash_attention" else lambda *a: run_int8(*a, False)
            run(name, "sweep", float("inf"), int(count) if count else None)
        return
    warm_s = None
    if args.warm_workers > 0 and args.configs == "sweep" and int8_only and not args.smoke:
        warm_s = compile_in_parallel(int8_only, args.warm_workers, min(150.0, args.deadline_s / 2))
    deadline = time.time() + args.deadline_s
    report = {
        "gpu": "cpu (Triton interpreter)" if args.smoke else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "configs": args.configs,
        "command": " ".join(sys.argv),
        "warm_compile_s": warm_s,
        "results": {},
    }
    for item in args.only.split(","):
        short, _, count = item.strip().partition(":")  # name:N = its first N shapes only
        name = ALIASES.get(short, short)
        max_shapes = int(count) if count else None
        start = time.time()
        try:
            if name.startswith("block_diag"):
                report["results"][name] = run_block_diag(
                    name, args.configs, deadline, max_shapes, not args.no_reference
                )
            elif name.startswith("int8_mqa"):
                report["results"][name] = run_int8(name, args.configs, deadline, max_shapes, not args.no_reference)
            elif name == "flash_attention":
                report["results"][name] = run_flash(name, args.configs, deadline, max_shapes)
            else:
                sys.exit(
                    f"attention_bench: unknown benchmark {short!r} (block_diag, block_diag_bwd, block_diag_rope, block_diag_rope_bwd, decode, prefill)"
                )
        except Exception as exc:  # one benchmark's failure must not lose the others' numbers
            report["results"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        print(f"{name}: {time.time() - start:.1f}s", flush=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
    for name, entries in report["results"].items():
        for e in entries if isinstance(entries, list) else [entries]:
            best = min((k for k in e.get("kernel", []) if "ms" in k), key=lambda k: k["ms"], default=None)
            print(name, json.dumps(e.get("params")), "kernel", best and {k: best[k] for k in best if k != "config"})
            print(
                "    speedups",
                json.dumps(e.get("speedup")),
                "errors",
                json.dumps({k: v for k, v in e.get("baselines", {}).items() if "error" in k}),
            )


if __name__ == "__main__":
    main()
