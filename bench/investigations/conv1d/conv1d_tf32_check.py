"""Does FP32 conv1d with TF32 tensor cores meet specs/conv1d.yaml's tolerance (atol 1e-4, rtol 5e-4
against float64)? At the production shape (B 2048, CIN = COUT = 96, L 200, KSIZE 3), inputs and
parameters drawn as the spec's reference draws them: F.conv1d with cuDNN's TF32 on (PyTorch's
default for convolutions, what the spec's baseline runs) and off, and this repository's kernel with
plain TF32 dots (a CONFIG the kernel does not declare: fp32_shift "load", fp32_precision "tf32")
and at its default. Each: elements outside the tolerance, max abs error, median ms (do_bench).

    python bench/investigations/conv1d/conv1d_tf32_check.py OUT.json
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, REPO, load_module  # noqa: E402


def main() -> None:
    ref = load_module(REPO / "specs" / "conv1d.py", "ref_conv1d")
    kernel = load_module(KERNELS / "conv1d.py", "kernel_conv1d")
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs()).cuda()
    x = ref.get_inputs()[0].cuda()
    w, b = model.weight.detach(), model.bias.detach()
    want = F.conv1d(x.double(), w.double(), b.double(), padding=1)
    limit = 1e-4 + 5e-4 * want.abs()
    rows = {
        "tf32_default": {
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        }
    }

    def measure(label, fn):
        with torch.no_grad():
            got = fn().double()
            err = (got - want).abs()
            rows[label] = {
                "outside_tolerance": int((err > limit).sum().item()),
                "elements": want.numel(),
                "max_abs_err": err.max().item(),
                "ms": triton.testing.do_bench(fn, warmup=25, rep=200),
            }
        print(label, rows[label], flush=True)

    for tf32 in (True, False):
        torch.backends.cudnn.allow_tf32 = tf32
        measure(f"F.conv1d cudnn.allow_tf32={tf32}", lambda: F.conv1d(x, w, b, padding=1))
    torch.backends.cudnn.allow_tf32 = True
    measure("kernel default CONFIG", lambda: kernel.conv1d_forward(x, w, b))
    kernel.CONFIG.update(fp32_shift="load", fp32_precision="tf32", fp32_BLOCK_CI=32)
    measure("kernel plain tf32 dots (fp32_shift load)", lambda: kernel.conv1d_forward(x, w, b))
    Path(sys.argv[1]).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
