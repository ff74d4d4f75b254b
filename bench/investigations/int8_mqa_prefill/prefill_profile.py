"""int8 MQA prefill for Nsight Compute: the spec's shape (B32 S1024, 16 query heads on one int8 KV head),
the file's default (or another HOPPER_PERSISTENT) and SDPA on the pre-dequantised bf16 cache, causal and
full, each warmed up and then run once inside an NVTX range "measure" (profile only those: ncu --nvtx
--nvtx-include "measure/").

    ncu --nvtx --nvtx-include "measure/" --section SpeedOfLight ... python bench/investigations/int8_mqa_prefill/prefill_profile.py
    ncu ... python bench/investigations/int8_mqa_prefill/prefill_profile.py --persistent 1 --masks full --no-sdpa
"""

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--persistent", type=int, default=None, help="HOPPER_PERSISTENT (default: the file's)")
parser.add_argument("--masks", choices=["both", "causal", "full"], default="both")
parser.add_argument("--no-sdpa", action="store_true", help="only the int8 prefill")
args = parser.parse_args()
kernel = load_module(KERNELS / "int8_mqa_prefill.py", "int8_mqa_prefill")
if args.persistent is not None:
    kernel.CONFIG["HOPPER_PERSISTENT"] = args.persistent
ref = load_module(REPO / "specs" / "int8_mqa_prefill.py", "ref_prefill")
torch.manual_seed(0)
q = torch.randn(32, 16, 1024, 128, device="cuda").to(torch.bfloat16)
kc, ks = ref.quantize(torch.randn(32, 1024, 128, device="cuda"))
vc, vs = ref.quantize(torch.randn(32, 1024, 128, device="cuda"))
ks, vs = ks.to(torch.bfloat16), vs.to(torch.bfloat16)
k = ref.dequantize(kc, ks, torch.bfloat16).unsqueeze(1)
v = ref.dequantize(vc, vs, torch.bfloat16).unsqueeze(1)
runs = []
for causal in {"both": (True, False), "causal": (True,), "full": (False,)}[args.masks]:
    runs.append(lambda c=causal: kernel.int8_mqa_prefill(q, kc, ks, vc, vs, c))
    if not args.no_sdpa:
        runs.append(lambda c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c, enable_gqa=True))
with torch.no_grad():
    for run in runs:
        run()
        run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("measure")
    for run in runs:
        run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("ok")
