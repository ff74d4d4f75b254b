#!/usr/bin/env bash
# On a GPU: does the offline operator's search reach >= 95% of the best configuration of
# the RMSNorm kernel's tunable space within 30 evaluations?
#   phase `sweep`:  bench/kernels/rmsnorm/rmsnorm_space.py measures the whole space (its best, and a poor start),
#                   then a 30-node search starts from the poor configuration (a copy of the
#                   knowledge base whose rmsnorm CONFIG is that start), killed at the call's end;
#   phase `finish`: `kernelevolve resume` completes the run, then the space's best is evaluated by
#                   the same evaluator (same baseline cache) so the two fitnesses compare directly.
# Usage (GPU host, repo root): bash bench/framework/offline_search_rmsnorm.sh sweep|finish OUTDIR [SECONDS]
set -u
phase=$1; out=$2; budget_s=${3:-540}
work=/tmp/ke-offline-search
mkdir -p "$work" "$out"
export KERNELEVOLVE_CACHE_DIR=$work/cache KERNELEVOLVE_DB=sqlite:///$work/runs.db KERNELEVOLVE_KB=$work/kb
start=$(date +%s)
left() { echo $(( budget_s - ($(date +%s) - start) )); }

if [ "$phase" = sweep ]; then
    python3 bench/kernels/rmsnorm/rmsnorm_space.py --out "$work" > "$out/space.log" 2>&1 || { tail -30 "$out/space.log"; exit 1; }
    cp "$work/rmsnorm_space.json" "$out/"
    rm -rf "$work/kb" && cp -r knowledge_base "$work/kb" && cp "$work/rmsnorm_start.py" "$work/kb/kernels/rmsnorm.py"
    echo "== sweep done in $(( $(date +%s) - start ))s; search for $(left)s"
    timeout -s KILL "$(left)" python3 -m kernelevolve run specs/rmsnorm.yaml --device cuda --budget 30 --policy greedy --seed 1 \
        > "$out/search_part1.log" 2>&1
    echo "run exited with $? (137: killed at the call's end, to be resumed)"
    tail -5 "$out/search_part1.log"
else
    run=$(python3 -m kernelevolve runs --json | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['id'])")
    echo "== resume $run"
    timeout -s KILL "$(( $(left) - 60 ))" python3 -m kernelevolve resume "$run" > "$out/search_part2.log" 2>&1
    echo "resume exited with $?"
    tail -5 "$out/search_part2.log"
    python3 -m kernelevolve show "$run" --json > "$out/search_show.json"
    python3 -m kernelevolve show "$run" > "$out/search_show.txt" 2>&1
    python3 -m kernelevolve eval specs/rmsnorm.yaml "$work/rmsnorm_best.py" --device cuda --json > "$out/space_best_eval.json"
    cp "$work/rmsnorm_space.json" "$out/" 2>/dev/null
    python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
show = json.load(open(f"{out}/search_show.json"))
best = json.load(open(f"{out}/space_best_eval.json"))
nodes = [n for n in show["nodes"] if n.get("fitness") is not None]
fits = [n["fitness"] for n in nodes]
running = [max(fits[: i + 1]) for i in range(len(fits))]
print("evaluated nodes:", len(nodes), "status:", show.get("status"), "reason:", show.get("termination_reason"))
print("space best (evaluator):", best["fitness"], "correct:", best["correct"])
print("search best:", max(fits) if fits else None, "ratio:", (max(fits) / best["fitness"]) if fits and best["fitness"] else None)
print("running best by evaluation:", [round(x, 3) for x in running])
PY
fi
