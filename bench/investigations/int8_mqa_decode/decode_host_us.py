"""Host time of one int8 MQA decode call at B128 KV2048 (16 query heads, Q_LEN 1): calls queued back to back
without waiting, the file's default (IMPL auto: the Gluon kernel on Hopper) against IMPL "triton", and the
Gluon plan's direct launch alone. Where these exceed the device time (~25-30 us here) an eager decode loop
is bound by the host.

    python bench/investigations/int8_mqa_decode/decode_host_us.py
"""

import sys
from pathlib import Path

import torch

sys.path[:0] = [
    str(Path(__file__).resolve().parents[2]),
    str(Path(__file__).resolve().parents[2] / "kernels" / "attention"),
]
from attention_bench import host_us  # noqa: E402
from benchlib import KERNELS, REPO, load_module  # noqa: E402


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("decode_host_us: needs a CUDA GPU")
    import _cached_launch
    import _decode_hopper

    kernel = load_module(KERNELS / "int8_mqa_decode.py", "int8_mqa_decode")
    ref = load_module(REPO / "specs" / "int8_mqa_decode.py", "ref_decode")
    batch, kv_len = 128, 2048
    q = torch.randn(batch, 16, 1, 128, device="cuda").to(torch.bfloat16)
    kc, ks = ref.quantize(torch.randn(batch, kv_len, 128, device="cuda"))
    vc, vs = ref.quantize(torch.randn(batch, kv_len, 128, device="cuda"))
    xs = (q, kc, ks.to(torch.bfloat16), vc, vs.to(torch.bfloat16))
    print("default (IMPL auto):", round(host_us(lambda: kernel.int8_mqa_decode(*xs), n=200), 1), "us")
    plan = next(iter(_decode_hopper._PLANS.values()), None)
    if plan is not None and plan.compiled is not None:
        out = torch.empty_like(q)
        tensors = (q, kc, xs[2], vc, xs[4], out, out, out, out)
        launch = lambda: _cached_launch.launch(plan.compiled, plan.grid, tensors, plan.scalars + plan.const_args)  # noqa: E731
        print("Gluon direct launch alone:", round(host_us(launch, n=200), 1), "us")
    kernel.CONFIG["IMPL"] = "triton"
    print("IMPL triton:", round(host_us(lambda: kernel.int8_mqa_decode(*xs), n=200), 1), "us")


if __name__ == "__main__":
    main()
