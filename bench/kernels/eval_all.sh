#!/usr/bin/env bash
# `kernelevolve eval` of every spec in specs/ with its knowledge-base reference kernel, on a GPU:
# the whole evaluation path (sandbox, harness, float64 check, do_bench vs the spec's baseline) at
# the production shapes. Usage (GPU host, repo root): bash bench/kernels/eval_all.sh OUTDIR [SPEC.yaml...]
# (default: every spec; each is evaluated with the kernel its `kernel:` field names, else its own name)
set -u
out=${1:?usage: bash bench/kernels/eval_all.sh OUTDIR [SPEC.yaml...]}
mkdir -p "$out"
export KERNELEVOLVE_CACHE_DIR=$(mktemp -d)
[ $# -gt 0 ] && shift
specs=("$@"); [ ${#specs[@]} -eq 0 ] && specs=(specs/*.yaml)
for spec in "${specs[@]}"; do
    name=$(basename "$spec" .yaml)
    kernel=$(sed -n 's/^kernel: *//p' "$spec"); kernel=${kernel:-$name}
    start=$(date +%s.%N)
    python3 -m kernelevolve eval "$spec" "knowledge_base/kernels/$kernel.py" --device cuda --json > "$out/eval_$name.json"
    rc=$?
    python3 - "$out/eval_$name.json" "$name" "$rc" "$start" <<'PY'
import json, sys, time
path, name, rc, start = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
d = json.load(open(path))
phases = " + ".join(f"{k} {v:.1f}s" for k, v in d["phases_s"].items())
print(f"{name}: exit {rc} correct={d['correct']} fitness={d['fitness'] and round(d['fitness'], 3)} "
      f"failure={d['failure']} eval {d['duration_s']:.1f}s ({phases}); wall {time.time() - start:.1f}s")
for s in d["shapes"]:
    print(f"    {s['label']:60s} {s['latency_ms'] or 0:8.4f} ms vs {s['baseline_ms'] or 0:8.4f} ms  {s['speedup'] or 0:5.2f}x  err {s['max_abs_err']}")
PY
done
