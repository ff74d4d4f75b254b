"""The flash-attention / int8 MQA prefill variants of the warp-specialised Gluon kernel on one GPU,
each variant in its own subprocess with a short timeout (a hang names its variant and does not stop the
others), then `kernelevolve eval` of the fastest variant that was right everywhere.

    python bench/kernels/flash_attention/flash_gpu_run.py --out DIR [--budget-s 140] [--runs p2_pp:prefill,p3_pp:prefill,...]

1. warm: every (variant, shape) compiled in parallel processes without launching a Gluon kernel
   (JITFunction.warmup in place of the launch), so the timed processes find Triton's cache warm;
2. run: one process a variant, one after the other (timeout each): NaN-poisoned outputs against the
   float32 computation at the specs' shapes and at ragged ones (16 query heads on one KV head, S = 1040;
   S = 1008; head dim 64; persistent variants on 7 programs, several work units each), then do_bench
   (median, L2 flushed) of the variant and of the SDPA baselines in the same process;
3. eval: for each operator, the variant with the best geometric-mean time over the spec's shapes among
   those right everywhere, written as a candidate file (the kernel file with its CONFIG updated) and run
   through `kernelevolve eval SPEC CANDIDATE --device cuda --json`.
Every step prints one JSON line (flushed) on stdout and DIR/flash_gpu_run.jsonl gets the same lines.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
KERNELS = REPO / "knowledge_base" / "kernels"
WS = {"IMPL": "gluon", "HOPPER_WS": True, "HOPPER_BLOCK_N": 128, "HOPPER_STAGES": 2}
VARIANTS = {  # name: CONFIG overrides (over the kernel file's CONFIG)
    "ws": dict(WS, HOPPER_PERSISTENT=0, HOPPER_PINGPONG=False),  # the first Gluon flash default
    "ws_pp": dict(WS, HOPPER_PERSISTENT=0, HOPPER_PINGPONG=True),
    "p1_pp": dict(WS, HOPPER_PERSISTENT=1, HOPPER_PINGPONG=True),
    "p2": dict(WS, HOPPER_PERSISTENT=2, HOPPER_PINGPONG=False),
    "p2_pp": dict(WS, HOPPER_PERSISTENT=2, HOPPER_PINGPONG=True),
    "p1_pp_lazy": dict(WS, HOPPER_PERSISTENT=1, HOPPER_PINGPONG=True, HOPPER_LAZY=True),
    "p2_pp_lazy": dict(WS, HOPPER_PERSISTENT=2, HOPPER_PINGPONG=True, HOPPER_LAZY=True),
    "p1_pp_eager": dict(WS, HOPPER_PERSISTENT=1, HOPPER_PINGPONG=True, HOPPER_LAZY=False),
    "p2_pp_eager": dict(WS, HOPPER_PERSISTENT=2, HOPPER_PINGPONG=True, HOPPER_LAZY=False),
}
PREFILL_ONLY = {"tl": {"IMPL": "triton"}}  # int8_mqa_prefill's earlier default (prepass + tl kernel)
OPS = {"flash": "flash_attention", "prefill": "int8_mqa_prefill"}
SPEC_SHAPES = {
    "flash": [dict(B=4, H=32, S=4096, D=128, causal=c) for c in (0, 1)],
    "prefill": [dict(B=32, H=16, S=1024, D=128, causal=c) for c in (1, 0)],
}
RAGGED = [  # (batch, query heads, kv heads, seq, head dim): _flash_hopper.attention directly
    (2, 16, 1, 1040, 128),
    (1, 3, 3, 208, 64),
]
LOG: list[str] = []


def emit(out: Path | None, **fields) -> None:
    line = json.dumps(fields)
    print(line, flush=True)
    if out is not None:
        with open(out / "flash_gpu_run.jsonl", "a") as f:
            f.write(line + "\n")


def load(op: str):
    sys.path.insert(0, str(KERNELS))
    import importlib

    return importlib.import_module(OPS[op])


def spec_inputs(op: str, shape: dict):
    import torch

    torch.manual_seed(0)
    g = dict(device="cuda", dtype=torch.bfloat16)
    if op == "flash":
        return [torch.randn(shape["B"], shape["H"], shape["S"], shape["D"], **g) for _ in range(3)]
    b, s, d = shape["B"], shape["S"], shape["D"]
    q = torch.randn(b, shape["H"], s, d, **g)
    xs = [q]
    for _ in range(2):  # the spec's quantisation: per-token scale max|x| / 127, codes rounded
        x = torch.randn(b, s, d, device="cuda")
        scale = x.abs().amax(-1).clamp_min(1e-6) / 127.0
        xs += [torch.round(x / scale[..., None]).clamp(-127, 127).to(torch.int8), scale.to(torch.bfloat16)]
    return xs


def reference(op: str, xs, causal: bool):
    import torch.nn.functional as F

    if op == "flash":
        q, k, v = (x.float() for x in xs)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    q, kc, ks, vc, vs = xs
    k = (kc.float() * ks.float()[..., None]).unsqueeze(1)
    v = (vc.float() * vs.float()[..., None]).unsqueeze(1)
    return F.scaled_dot_product_attention(q.float(), k, v, is_causal=causal, enable_gqa=True)


def warm(variant: str, op: str, part: int) -> None:
    """Compile the variant's Gluon kernels for one shape it will run (part: a spec shape, then the ragged
    ones), launching none of them."""
    import torch

    kernel = load(op)
    import _flash_hopper as hopper

    config = dict(kernel.CONFIG, **{**VARIANTS, **PREFILL_ONLY}[variant])
    kernel.CONFIG.update(config)

    class WarmOnly:
        def __init__(self, fn):
            self.fn = fn

        def __getitem__(self, grid):
            return lambda *a, **k: self.fn.warmup(*a, grid=grid, **k)

    for name in ("_flash_fwd_hopper_ws", "_flash_fwd_hopper"):
        setattr(hopper, name, WarmOnly(getattr(hopper, name)))
    shapes = SPEC_SHAPES[op]
    if part < len(shapes):
        xs = spec_inputs(op, shapes[part])
        kernel.ModelNew(bool(shapes[part]["causal"]))(*xs)
    elif config.get("IMPL") == "gluon":
        hc = hopper.hopper_config(config)
        for batch, hq, hkv, seq, dim in RAGGED[part - len(shapes) : part - len(shapes) + 1]:
            for causal in (False, True):
                q = torch.randn(batch, hq, seq, dim, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(batch, hkv, seq, dim, device="cuda", dtype=torch.bfloat16)
                for programs in (0, 7) if hc["PERSISTENT"] else (0,):
                    hopper.attention(q, k, k, torch.empty_like(q), causal, dict(hc, PROGRAMS=programs))
    torch.cuda.synchronize()


def run(variant: str, op: str, out: Path) -> None:
    """Check (spec shapes and, for flash, the ragged ones), then time against SDPA in this process."""
    import torch
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kernel = load(op)
    import _flash_hopper as hopper

    config = dict(kernel.CONFIG, **{**VARIANTS, **PREFILL_ONLY}[variant])
    kernel.CONFIG.update(config)

    def bench(fn) -> float:
        return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))

    def close(outp, ref) -> tuple[bool, float]:
        diff = (outp.float() - ref).abs()
        return bool(torch.isfinite(outp).all()) and bool((diff <= 0.02 + 0.02 * ref.abs()).all()), diff.max().item()

    right = True
    if op == "flash" and config.get("IMPL") == "gluon":
        hc = hopper.hopper_config(config)
        for batch, hq, hkv, seq, dim in RAGGED:
            for causal in (False, True):
                for programs in (0, 7) if hc["PERSISTENT"] else (0,):
                    torch.manual_seed(1)
                    q = torch.randn(batch, hq, seq, dim, device="cuda", dtype=torch.bfloat16)
                    k = torch.randn(batch, hkv, seq, dim, device="cuda", dtype=torch.bfloat16)
                    v = torch.randn_like(k)
                    emit(
                        out,
                        step="check",
                        variant=variant,
                        shape=[batch, hq, hkv, seq, dim],
                        causal=causal,
                        programs=programs,
                    )
                    o = torch.full_like(q, float("nan"))
                    hopper.attention(q, k, v, o, causal, dict(hc, PROGRAMS=programs))
                    ref = F.scaled_dot_product_attention(
                        q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=hkv != hq
                    )
                    ok, err = close(o, ref)
                    right &= ok
                    emit(out, step="checked", variant=variant, ok=ok, max_err=round(err, 5))
    for shape in SPEC_SHAPES[op]:
        causal = bool(shape["causal"])
        xs = spec_inputs(op, shape)
        model = kernel.ModelNew(causal)
        emit(out, step="spec", variant=variant, op=op, **shape)
        junk = torch.empty(int(torch.cuda.mem_get_info()[0] * 0.3) // 4, device="cuda").fill_(float("nan"))
        del junk  # freshly allocated outputs start as NaN
        ok, err = close(model(*xs), reference(op, xs, causal))
        right &= ok
        entry = dict(step="timed", variant=variant, op=op, **shape, ok=ok, max_err=round(err, 5))
        if ok:
            flops = 4 * shape["B"] * shape["H"] * shape["S"] ** 2 * shape["D"] * (0.5 if causal else 1.0)
            entry["ms"] = round(bench(lambda: model(*xs)), 5)
            entry["TFLOP/s"] = round(flops / entry["ms"] / 1e9, 1)
            if op == "flash":
                sdpa = lambda: F.scaled_dot_product_attention(*xs, is_causal=causal)  # noqa: E731
                entry["sdpa_default_ms"] = round(bench(sdpa), 5)
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    entry["sdpa_cudnn_ms"] = round(bench(sdpa), 5)
            else:
                q, kc, ks, vc, vs = xs
                k = (kc.float() * ks.float()[..., None]).to(torch.bfloat16).unsqueeze(1)
                v = (vc.float() * vs.float()[..., None]).to(torch.bfloat16).unsqueeze(1)
                gqa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)  # noqa: E731
                entry["sdpa_bf16_gqa_ms"] = round(bench(gqa), 5)
            for key in [k for k in entry if k.startswith("sdpa") and k.endswith("_ms")]:
                entry["x_" + key[:-3]] = round(entry[key] / entry["ms"], 3)
        emit(out, **entry)
        del xs
        torch.cuda.empty_cache()
    emit(out, step="variant_done", variant=variant, op=op, right_everywhere=right)


def candidate(op: str, overrides: dict, directory: Path) -> Path:
    """The kernel file with CONFIG's values for these keys replaced (the source otherwise unchanged)."""
    sys.path.insert(0, str(REPO))
    from kernelevolve.operators.tunables import rewrite_config

    path = directory / f"{OPS[op]}.py"
    path.write_text(rewrite_config((KERNELS / f"{OPS[op]}.py").read_text(), overrides))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=140.0)
    parser.add_argument("--runs", default=None, help="VARIANT:OP,... in the order to run (default: the nine below)")
    parser.add_argument("--worker", nargs=4, metavar=("WHAT", "VARIANT", "OP", "PART"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.worker:
        what, variant, op, part = args.worker
        if what == "warm":
            warm(variant, op, int(part))
        else:
            run(variant, op, out)
        return
    start = time.time()
    # The first Gluon flash default first (a check of the machine), then the other variants by what they
    # are expected to give, the tl prefill in between
    order = [
        ("ws", "flash"),
        ("p2_pp", "flash"),
        ("p2_pp", "prefill"),
        ("tl", "prefill"),
        ("p1_pp", "flash"),
        ("ws_pp", "flash"),
        ("p2", "flash"),
        ("p1_pp", "prefill"),
        ("ws_pp", "prefill"),
    ]
    if args.runs:
        order = [tuple(run.split(":")) for run in args.runs.split(",")]
        unknown = [
            run for run in order if len(run) != 2 or run[0] not in {**VARIANTS, **PREFILL_ONLY} or run[1] not in OPS
        ]
        if unknown:
            sys.exit(
                f"flash_gpu_run: unknown VARIANT:OP {unknown}; variants {sorted({**VARIANTS, **PREFILL_ONLY})}, ops {sorted(OPS)}"
            )
    me = [sys.executable, __file__, "--out", str(out), "--worker"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # 1. warm, in parallel (one process a variant and shape): no Gluon kernel launched
    jobs = [
        (v, op, part)
        for v, op in order
        if v != "tl"
        for part in range(len(SPEC_SHAPES[op]) + (len(RAGGED) if op == "flash" else 0))
    ]
    procs = []
    for job in jobs:
        while sum(p.poll() is None for p in procs) >= 14:
            time.sleep(0.2)
        procs.append(
            subprocess.Popen(me + ["warm", *map(str, job)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )
    for job, proc in zip(jobs, procs):
        try:
            _, err = proc.communicate(timeout=max(5.0, 50 - (time.time() - start)))
            if proc.returncode:
                emit(out, step="warm", job=job, rc=proc.returncode, err=err.decode()[-300:])
        except subprocess.TimeoutExpired:
            proc.kill()
            emit(out, step="warm", job=job, rc="timeout")
    emit(out, step="warmed", jobs=len(jobs), s=round(time.time() - start, 1))
    # 2. run, one variant at a time
    results: dict = {}
    for v, op in order:
        left = args.budget_s - 50 - (time.time() - start)  # 50 s kept for the evals
        if left < 8:
            emit(out, step="skipped", variant=v, op=op, why="budget")
            continue
        try:
            proc = subprocess.run(
                me + ["run", v, op, "0"], env=env, capture_output=True, text=True, timeout=min(30.0, left)
            )
            rc = proc.returncode
            text = proc.stdout + (proc.stderr[-400:] if rc else "")
        except subprocess.TimeoutExpired as exc:
            rc, text = "timeout", (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
        for x in lines:  # the numbers on stdout too (files under DIR may not come back)
            if x["step"] in ("timed", "variant_done") or (x["step"] == "checked" and not x["ok"]):
                print(json.dumps(x), flush=True)
        if rc:
            print(text[-1500:], flush=True)
        emit(out, step="run", variant=v, op=op, rc=rc, last=lines[-1] if lines else None)
        if rc == 0:
            timed = [x for x in lines if x.get("step") == "timed"]
            done = [x for x in lines if x.get("step") == "variant_done"]
            if done and done[0]["right_everywhere"] and all("ms" in x for x in timed):
                results[(v, op)] = math.exp(sum(math.log(x["ms"]) for x in timed) / len(timed))
    # 3. eval of each operator's fastest variant right everywhere
    cands = REPO / "bench" / "_candidates"  # in the repository: the eval sandbox has a private /tmp
    cands.mkdir(exist_ok=True)
    for op in OPS:
        mine = {v: t for (v, o), t in results.items() if o == op}
        if not mine:
            emit(out, step="eval", op=op, skipped="no variant right everywhere")
            continue
        best = min(mine, key=mine.get)
        overrides = {**VARIANTS, **PREFILL_ONLY}[best]
        path = candidate(op, overrides, cands)
        left = args.budget_s - (time.time() - start)
        emit(
            out,
            step="eval",
            op=op,
            variant=best,
            geomean_ms=round(mine[best], 5),
            overrides=overrides,
            left_s=round(left),
        )
        spec = REPO / "specs" / f"{OPS[op]}.yaml"
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "kernelevolve", "eval", str(spec), str(path), "--device", "cuda", "--json"],
                capture_output=True, text=True, timeout=max(20.0, min(60.0, left)), cwd=REPO,
            )  # fmt: skip
            (out / f"flash_eval_{OPS[op]}.json").write_text(proc.stdout)
            (out / f"flash_eval_{OPS[op]}_candidate.py").write_text(path.read_text())
            try:
                report = json.loads(proc.stdout)
                shapes = [
                    {k: s.get(k) for k in ("label", "correct", "latency_ms", "baseline_ms", "speedup", "max_abs_err")}
                    for s in report.get("shapes", [])
                ]
                emit(out, step="evaluated", op=op, variant=best, correct=report.get("correct"), shapes=shapes)
            except json.JSONDecodeError:
                emit(
                    out,
                    step="evaluated",
                    op=op,
                    variant=best,
                    rc=proc.returncode,
                    tail=(proc.stdout + proc.stderr)[-400:],
                )
        except subprocess.TimeoutExpired:
            emit(out, step="evaluated", op=op, variant=best, rc="timeout")
    emit(out, step="done", total_s=round(time.time() - start, 1))


if __name__ == "__main__":
    main()
