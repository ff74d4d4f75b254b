"""Cheats against the verdict on a GPU, each evaluated with the screen off (what holds behind it) and
the honest control beside them, in one process: the outside-timed bound against a patched timer, the
judge against zeros and a forged comparison.

    python bench/framework/verdict_probe.py --out DIR

Writes DIR/verdict_probe.json: per candidate, correct / failure / fitness / latencies / marks and the
outside-timing figures the evaluator recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelevolve.evaluation.evaluator import Evaluator  # noqa: E402
from kernelevolve.memory.repository import BaselineTable, Repository  # noqa: E402
from kernelevolve.spec import load_spec  # noqa: E402
from tests.evaluation.hostile.corpus import CORPUS, SPEC  # noqa: E402

HONEST = CORPUS["honest"].source
# The in-process median divided by 4: the statistics module the harness's clock reads at measure time.
PATCHED_MEDIAN = (
    "import statistics\n_median = statistics.median\nstatistics.median = lambda xs: _median(xs) / 4\n" + HONEST
)
# Zeros from a Triton kernel (elementwise within atol at long rows), comparison rewritten in-process.
ZEROS = HONEST.replace("(e / tl.sum(e, axis=0))", "(e * 0.0)")
FORGED_COMPARE = (
    "import sys\nfor _m in list(sys.modules.values()):\n"
    "    if getattr(_m, '__name__', '').startswith('kernelevolve') and hasattr(_m, 'compare'):\n"
    "        _m.compare = lambda *a, **k: (True, '', 0.0, 0.0)\n" + ZEROS
)
CANDIDATES = {"honest": HONEST, "patched_median": PATCHED_MEDIAN, "zeros": ZEROS, "forged_compare": FORGED_COMPARE}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shape", default="batch_size=4096,dim=8192")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(SPEC)
    shape = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    store = BaselineTable(Repository(f"sqlite:///{args.out / 'baselines.db'}"))
    rows = {}
    with Evaluator(device="cuda", baseline_store=store, screen=False) as evaluator:
        for name, source in CANDIDATES.items():
            r = evaluator.evaluate(spec, source, [shape])
            rows[name] = {
                "correct": r.correct,
                "failure": r.failure,
                "message": r.message,
                "fitness": r.fitness,
                "latency_ms": [s.latency_ms for s in r.shapes],
                "baseline_ms": [s.baseline_ms for s in r.shapes],
                "marks": r.marks,
                "outside_timing": {k: asdict(v) for k, v in r.diagnostics.outside_timing.items()} or None,
                "phases_s": r.phases_s,
                "duration_s": r.duration_s,
            }
            print(name, json.dumps(rows[name])[:600], flush=True)
    (args.out / "verdict_probe.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
