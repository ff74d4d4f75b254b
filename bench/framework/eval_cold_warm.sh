#!/usr/bin/env bash
# `kernelevolve eval` on a real GPU, on the softmax (and RMSNorm) specs with the
# reference candidates, at the specs' production shapes, against torch.compile. Run twice so the
# second shows the evaluation latency with the baseline cache and Triton's compile cache warm.
# Usage (on the GPU host, repo root): bash bench/framework/eval_cold_warm.sh OUTDIR
set -u
out=${1:?usage: bash bench/framework/eval_cold_warm.sh OUTDIR}
mkdir -p "$out"
export KERNELEVOLVE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/gpu.txt"
for spec in softmax rmsnorm; do
  for pass in cold warm; do
    echo "== kernelevolve eval specs/$spec.yaml knowledge_base/kernels/$spec.py --device cuda ($pass caches)"
    start=$(date +%s.%N)
    python3 -m kernelevolve eval specs/$spec.yaml knowledge_base/kernels/$spec.py --device cuda --json > "$out/eval_${spec}_$pass.json"
    echo "exit $? wall $(python3 -c "print(round($(date +%s.%N) - $start, 1))")s"
    python3 - "$out/eval_${spec}_$pass.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"correct={d['correct']} fitness={d['fitness']} failure={d['failure']} {d['message'][:200]}")
print("phases", {k: round(v, 1) for k, v in d["phases_s"].items()}, "duration", round(d["duration_s"], 1))
for s in d["shapes"]:
    print(f"  {s['label']:28s} err={s['max_abs_err']} cand={s['latency_ms']} base={s['baseline_ms']} cached={s['baseline_cached']} speedup={s['speedup']} GB/s={s['gbps']}")
PY
  done
done
