#!/usr/bin/env bash
# On a GPU: a 30-evaluation offline search from a reference kernel's default (node 0 is
# the knowledge base's kernel as it stands), and whether its best is at least the default's fitness.
# A search takes longer than one GPU call may run, so the run lives in a work directory on the GPU
# host and every call continues it (`kernelevolve resume`) until it finishes; each call leaves the
# run's state and a summary in OUTDIR.
# Usage (GPU host, repo root): bash bench/framework/search_recsys.sh SPEC_NAME OUTDIR [SECONDS]
#   SPEC_NAME: conv1d | optimized_fm | pffn | mbdt (specs/SPEC_NAME.yaml)
set -u
spec=$1; out=$2; budget_s=${3:-230}
[ -f "specs/$spec.yaml" ] || { echo "gpu_search_recsys.sh: no specs/$spec.yaml" >&2; exit 2; }
work=/tmp/ke-recsys-search/$spec
mkdir -p "$work" "$out"
export KERNELEVOLVE_CACHE_DIR=$work/cache KERNELEVOLVE_DB=sqlite:///$work/runs.db
device=${DEVICE:-cuda}; nodes=${NODES:-30}  # DEVICE=interpret NODES=3 tries the script on a CPU
parallel=${PARALLEL:-4}  # nodes in flight: the evaluator shares the GPU between their checks, times them alone
last_run() { python3 -m kernelevolve runs --json 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin); print(r[0]['id'] if r else '')" 2>/dev/null; }
run=$(last_run)
if [ -z "$run" ]; then
    echo "== new search on $spec for up to ${budget_s}s"
    timeout -s KILL "$budget_s" python3 -m kernelevolve run "specs/$spec.yaml" --device "$device" --budget "$nodes" --policy greedy --seed 1 --parallel "$parallel" \
        >> "$out/search.log" 2>&1; rc=$?
elif [ "$(python3 -m kernelevolve runs --json | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['status'])")" = finished ]; then
    echo "== $run has finished"; rc=0
else
    echo "== resume $run for up to ${budget_s}s"
    timeout -s KILL "$budget_s" python3 -m kernelevolve resume "$run" >> "$out/search.log" 2>&1; rc=$?
fi
echo "exited with $rc (137: stopped at the call's end; call again to resume)"
tail -3 "$out/search.log"
run=$(last_run)
[ -n "$run" ] || { echo "no run was recorded (see $out/search.log)"; exit 1; }
python3 -m kernelevolve show "$run" --json > "$out/show.json" || { echo "kernelevolve show $run failed"; exit 1; }
python3 -m kernelevolve show "$run" > "$out/show.txt" 2>&1
# A search killed at the call's end leaves its last writes in the SQLite write-ahead log: fold them in first.
python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$work/runs.db"
cp "$work/runs.db" "$out/runs.db"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
show = json.load(open(f"{out}/show.json"))
evaluated = [n for n in show["nodes"] if n.get("state") == "evaluated"]
failed = [n["id"] for n in evaluated if n.get("failure")]
# The kernel as shipped: the draft "reference kernel NAME with its own CONFIG" (not always node 0: drafts run in parallel).
default = next((n["fitness"] for n in evaluated if n.get("kind") == "draft" and "its own CONFIG" in (n.get("note") or "")), None)
# The search's best as the search counts it: nodes held for a person (marks) do not count until approved.
best = max((n["fitness"] for n in evaluated if n.get("fitness") is not None and (not n.get("marks") or n.get("approved"))), default=None)
held = {n["id"]: n["marks"] for n in evaluated if n.get("marks") and not n.get("approved")}
summary = {"run": show.get("id"), "status": show.get("status"), "reason": show.get("termination_reason"),
           "evaluated": len(evaluated), "failed_nodes": failed, "held_for_review": held, "default_fitness": default, "best_fitness": best,
           "best_at_least_default": None if default is None or best is None else best >= default}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(summary)
PY
