"""Run one configuration of bench/kernels/int8_mqa_decode/decode_regs_run.py a few times at one shape (for Nsight Compute).

ncu ... python bench/investigations/int8_mqa_decode/decode_regs_profile.py CONFIG BATCH KV_LEN Q_LEN
"""

import sys
from pathlib import Path

import torch

sys.path[:0] = [
    str(Path(__file__).resolve().parents[2]),
    str(Path(__file__).resolve().parents[2] / "kernels" / "int8_mqa_decode"),
]
from benchlib import KERNELS, REPO, load_module  # noqa: E402
from decode_regs_run import CONFIGS  # noqa: E402

name, batch, kv_len, q_len = sys.argv[1], *map(int, sys.argv[2:5])
kernel = load_module(KERNELS / "int8_mqa_decode.py", "int8_mqa_decode")
kernel.CONFIG.update(CONFIGS[name])
ref = load_module(REPO / "specs" / "int8_mqa_decode.py", "ref_decode")
q = torch.randn(batch, 16, q_len, 128, device="cuda").to(torch.bfloat16)
kc, ks = ref.quantize(torch.randn(batch, kv_len, 128, device="cuda"))
vc, vs = ref.quantize(torch.randn(batch, kv_len, 128, device="cuda"))
with torch.no_grad():
    for _ in range(3):
        kernel.int8_mqa_decode(q, kc, ks.to(torch.bfloat16), vc, vs.to(torch.bfloat16))
torch.cuda.synchronize()
print("ok", name, batch, kv_len, q_len)
