"""Establish the best configuration of the RMSNorm reference kernel's whole tunable space (GPU).

The space (knowledge_base/kernels/rmsnorm.py TUNABLES) has ~10k configurations, but a shape's
latency depends only on the path its row length takes and that path's knobs:

  tile path  (next_pow2(N) <= single_block_max_n): tile_elems, elems_per_thread, max_warps
  chunk path (otherwise, chunk_n > 0): chunk_n, split_block_n, split_num_warps, num_stages, l2_hints
  split path (otherwise, chunk_n == 0): split_block_n, split_num_warps, split_programs_per_sm,
             num_stages, reverse_second_pass, l2_hints

So every (shape, path, knobs) combination is timed once, each configuration's fitness (the
geometric mean over the spec's shapes of torch.compile latency / kernel latency, as the evaluator
defines it) is composed from that table, and the best is re-timed end to end to check the
composition. Also writes two kernels for the search experiment: the best configuration, and a
poor-but-correct starting configuration (a low percentile of the space).

Usage (GPU host, repo root): python3 bench/kernels/rmsnorm/rmsnorm_space.py --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import REPO, load_module  # noqa: E402

from kernelevolve.operators.tunables import read_declared, rewrite_config  # noqa: E402
from kernelevolve.spec import load_spec  # noqa: E402

PATH_KNOBS = {
    "tile": ["tile_elems", "elems_per_thread", "max_warps"],
    "chunk": ["chunk_n", "split_block_n", "split_num_warps", "num_stages", "l2_hints"],
    "split": [
        "split_block_n",
        "split_num_warps",
        "split_programs_per_sm",
        "num_stages",
        "reverse_second_pass",
        "l2_hints",
    ],
}


def path_of(config: dict, n: int) -> str:
    block_n = 1 << (n - 1).bit_length()
    if block_n <= config["single_block_max_n"]:
        return "tile"
    return "chunk" if config["chunk_n"] > 0 else "split"


GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"  # CPU: a smoke test of this script under TRITON_INTERPRET=1


def median_ms(fn, warmup: float, rep: float) -> float:
    fn()
    if not GPU:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    torch.cuda.synchronize()
    return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--start-percentile", type=float, default=10.0, help="where in the space the search's start config lies"
    )
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--rep", type=float, default=30.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    spec = load_spec(REPO / "specs/rmsnorm.yaml")
    kernel_path = REPO / "knowledge_base/kernels/rmsnorm.py"
    source = kernel_path.read_text()
    declared = read_declared(source)
    tunables, default = declared.tunables, declared.config
    kernel = load_module(kernel_path, "rmsnorm_kernel")
    ref = load_module(spec.reference, "rmsnorm_reference")
    dtype = getattr(torch, spec.dtypes[0])

    shapes = []
    for params in spec.shapes if GPU else spec.interpret_shapes:
        m, n = params["M"], params["N"]
        torch.manual_seed(0)
        x = torch.randn(m, n, device=DEVICE, dtype=dtype)
        model = ref.Model(n).to(DEVICE).to(dtype)
        with torch.no_grad():
            model.weight.copy_(1 + 0.1 * torch.randn(n, device=DEVICE))
        want = model.float()(x.float()).to(dtype).float()  # fp32 reference for the sweep's own check
        model = model.to(dtype)
        compiled = torch.compile(model) if GPU else model
        with torch.no_grad():
            base = median_ms(lambda: compiled(x), 25, 100)
        shapes.append({"params": params, "x": x, "w": model.weight.detach(), "want": want, "baseline_ms": base})
        print(f"baseline torch.compile M={m} N={n}: {base:.4f} ms", flush=True)

    # -- time every (shape, path, knobs) once -------------------------------------------------
    table: dict[str, float | None] = {}
    for si, sh in enumerate(shapes):
        n = sh["params"]["N"]
        paths = {
            path_of({**default, "single_block_max_n": t, "chunk_n": c}, n)
            for t in tunables["single_block_max_n"]
            for c in tunables["chunk_n"]
        }
        for path in sorted(paths):
            knobs = PATH_KNOBS[path]
            values = [
                tunables[k] if not (path == "chunk" and k == "chunk_n") else [v for v in tunables[k] if v > 0]
                for k in knobs
            ]
            for combo in itertools.product(*values):
                cfg = dict(default, **dict(zip(knobs, combo)))
                cfg["single_block_max_n"] = (
                    max(tunables["single_block_max_n"]) if path == "tile" else min(tunables["single_block_max_n"])
                )
                if path == "split":
                    cfg["chunk_n"] = 0
                assert path_of(cfg, n) == path
                kernel.CONFIG.clear()
                kernel.CONFIG.update(cfg)
                key = json.dumps([si, path, list(combo)])
                try:
                    with torch.no_grad():
                        y = kernel.rmsnorm_forward(sh["x"], sh["w"], 1e-6)
                        ok = bool(torch.allclose(y.float(), sh["want"], atol=0.05, rtol=0.02))
                        table[key] = (
                            median_ms(lambda: kernel.rmsnorm_forward(sh["x"], sh["w"], 1e-6), args.warmup, args.rep)
                            if ok
                            else None
                        )
                except Exception as exc:  # a configuration that fails counts as fitness 0
                    print(f"  {key}: {type(exc).__name__}: {exc}"[:200], flush=True)
                    table[key] = None
            done = sum(1 for k in table if json.loads(k)[:2] == [si, path])
            print(f"shape {si} N={n} path {path}: {done} combos timed ({time.time() - t0:.0f}s)", flush=True)

    # -- compose every configuration's fitness ---------------------------------------------
    names = list(tunables)

    def fitness(cfg: dict) -> float:
        logs = 0.0
        for si, sh in enumerate(shapes):
            path = path_of(cfg, sh["params"]["N"])
            ms = table.get(json.dumps([si, path, [cfg[k] for k in PATH_KNOBS[path]]]))
            if ms is None:
                return 0.0
            logs += math.log(sh["baseline_ms"] / ms)
        return math.exp(logs / len(shapes))

    scored = sorted(
        ((fitness(dict(zip(names, vals))), vals) for vals in itertools.product(*(tunables[k] for k in names))),
        reverse=True,
    )
    best_fit, best_vals = scored[0]
    best = dict(zip(names, best_vals))
    correct = [s for s in scored if s[0] > 0]
    if not correct:
        sys.exit("no configuration of the space was correct: see the errors above")
    start_fit, start_vals = correct[min(len(correct) - 1, int(len(correct) * (1 - args.start_percentile / 100)))]
    start = dict(zip(names, start_vals))

    # -- check the composition: re-time the best end to end ------------------------------------
    kernel.CONFIG.clear()
    kernel.CONFIG.update(best)
    measured = []
    with torch.no_grad():
        for sh in shapes:
            measured.append(
                sh["baseline_ms"] / median_ms(lambda: kernel.rmsnorm_forward(sh["x"], sh["w"], 1e-6), 25, 100)
            )
    best_measured = math.exp(sum(map(math.log, measured)) / len(measured))

    (args.out / "rmsnorm_best.py").write_text(rewrite_config(source, best))
    (args.out / "rmsnorm_start.py").write_text(rewrite_config(source, start))
    report = {
        "gpu": torch.cuda.get_device_name(0) if GPU else "cpu (interpreter smoke test)",
        "torch": torch.__version__,
        "space_size": len(scored),
        "configs_correct": len(correct),
        "combos_timed": len(table),
        "baselines_ms": [sh["baseline_ms"] for sh in shapes],
        "shapes": [sh["params"] for sh in shapes],
        "best": {
            "config": best,
            "fitness_composed": best_fit,
            "fitness_retimed": best_measured,
            "per_shape_speedup_retimed": measured,
        },
        "default": {"config": default, "fitness_composed": fitness(default)},
        "start": {"config": start, "fitness_composed": start_fit, "percentile": args.start_percentile},
        "fitness_percentiles": {
            p: scored[min(len(scored) - 1, int(len(scored) * (1 - p / 100)))][0]
            for p in (100, 99, 90, 75, 50, 25, 10, 1)
        },
        "configs_within_95pct_of_best": sum(1 for f, _ in scored if f >= 0.95 * best_fit),
        "table": table,
        "seconds": time.time() - t0,
    }
    (args.out / "rmsnorm_space.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "table"}, indent=1))


if __name__ == "__main__":
    main()
