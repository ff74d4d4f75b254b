#!/usr/bin/env bash
# On a GPU: an exported op's generated benchmark reproduces its node's speedup within 5%.
# A short real search (offline operator) on the GPU, its best node approved and exported with
# `kernelevolve export --as-op`, then the generated benchmark run; everything lands under --out.
#
#   bash bench/framework/review_export_speedup.sh --out "$OUT"                 # H200: search, export, benchmark
#   bash bench/framework/review_export_speedup.sh --out /tmp/x --dry-run       # CPU: the same steps under the interpreter
#
# Look at OUT/bench/summary.json: geomean_speedup, recorded_fitness, ratio_to_recorded, within_5pct,
# and per case speedup_vs_recorded.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="" DRY=0 SPEC="specs/softmax.yaml" BUDGET=2
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT="$2"; shift 2 ;;
        --dry-run) DRY=1; shift ;;
        --spec) SPEC="$2"; shift 2 ;;
        --budget) BUDGET="$2"; shift 2 ;;
        *) echo "error: unknown argument $1 (use --out DIR [--dry-run] [--spec YAML] [--budget N])" >&2; exit 2 ;;
    esac
done
[ -n "$OUT" ] || { echo "error: --out DIR is required" >&2; exit 2; }
mkdir -p "$OUT"
DB="sqlite:///$(realpath "$OUT")/runs.db"
DEVICE=cuda; BENCH_ARGS=()
if [ "$DRY" = 1 ]; then DEVICE=interpret; BENCH_ARGS=(--dry-run); fi

python -m kernelevolve run "$SPEC" --device "$DEVICE" --budget "$BUDGET" --drafts 1 --seed 1 --db "$DB" --json \
    >"$OUT/run.json" 2>"$OUT/run.log" || true   # exit 1 only says no correct kernel; the next step tells
RUN=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$OUT/run.json")
NODE=$(python -m kernelevolve show "$RUN" --db "$DB" --json | python -c '
import json, sys
best = json.load(sys.stdin)["best"]
if best is None:
    sys.exit("error: the search found no correct node to export (see run.log)")
print(best["id"])')
python -m kernelevolve review "$RUN" "$NODE" --approve --reviewer bench --note "bench/framework/review_export_speedup.sh" --db "$DB"
python -m kernelevolve export "$RUN" "$NODE" -o "$OUT/op" --as-op kev::bench_op --db "$DB"
python "$OUT/op/bench_op_bench.py" --out "$OUT/bench" "${BENCH_ARGS[@]}"
# The generated test at the spec's shapes on the GPU (inductor for its torch.compile check), after the
# benchmark so that a slow compile cannot cost the timings.
if [ "$DRY" = 0 ]; then
    timeout 120 python -m pytest -v -p no:cacheprovider "$OUT/op/bench_op_test.py" >"$OUT/generated_test.log" 2>&1 \
        && echo "generated test: passed" || echo "generated test: FAILED or timed out (see generated_test.log)"
fi
python -c '
import json, sys
s = json.load(open(sys.argv[1]))
print("summary:", json.dumps({k: s.get(k) for k in ("geomean_speedup", "recorded_fitness", "ratio_to_recorded", "within_5pct", "dry_run")}))
' "$OUT/bench/summary.json"
