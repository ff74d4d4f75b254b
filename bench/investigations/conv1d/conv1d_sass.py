"""Compile knowledge_base/kernels/conv1d.py's kernel for sm_90a without a GPU (Triton's bundled
ptxas / cuobjdump) at the production shape (B 2048, CIN = COUT = 96, L 200, KSIZE 3) and print
registers, shared memory, spills and the instruction mix of its CIN loop, for CONFIG overrides:

    python bench/investigations/conv1d/conv1d_sass.py [DTYPE=float32] [KEY=VALUE ...] [DUMP=/tmp/x]

The launch arguments are the ones conv1d_forward passes on a GPU (recorded from a CPU call, with
the GPU-only choices, ALIGN and PRECISION, set as a CUDA input would set them).
"""

import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "knowledge_base" / "kernels"))
import conv1d as kernel  # noqa: E402

ADDRESS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/")


def opcode(line: str) -> str:
    text = re.sub(r"^\s+/\*[0-9a-f]+\*/\s+", "", line).split(";")[0]
    words = re.sub(r"^@!?U?P\w+\s+", "", text).split()
    return words[0] if words else ""


class Recorder:
    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.grid, self.args, self.kwargs = grid, args, kwargs

        return call


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    dtype = getattr(torch, args.pop("DTYPE", "float32"))
    dump = args.pop("DUMP", "")
    batch = int(args.pop("B", 2048))
    for key, value in args.items():
        old = kernel.CONFIG[key]
        kernel.CONFIG[key] = value in ("1", "True", "true") if isinstance(old, bool) else type(old)(value)
    jit = kernel._conv1d_kernel
    rec = Recorder()
    kernel._conv1d_kernel = rec
    x = torch.zeros(batch, 96, 200, dtype=dtype)
    w = torch.zeros(96, 96, 3, dtype=dtype)
    packed = None
    if kernel.needs_split_weight(x, w):  # what pack_weight(split=True) returns, without its kernel
        packed = torch.zeros(2, 3, 96, 96, dtype=torch.bfloat16)
    kernel.conv1d_forward(x, w, torch.zeros(96, dtype=dtype), packed)
    if kernel.CONFIG.get("fp32_maxnreg") and dtype == torch.float32:  # passed on CUDA inputs only
        rec.kwargs["maxnreg"] = kernel.CONFIG["fp32_maxnreg"]
    kernel._conv1d_kernel = jit
    kw = dict(rec.kwargs)
    num_warps = kw.pop("num_warps")
    maxnreg = kw.pop("maxnreg", None)
    kw["ALIGN"] = 16 // x.element_size()  # what a 16-byte aligned CUDA input gets
    kw["PRECISION"] = kernel.CONFIG["fp32_precision"] if dtype == torch.float32 else "tf32"
    names = jit.arg_names
    signature, consts, attrs = {}, dict(kw), {}
    for i, (name, value) in enumerate(zip(names, rec.args)):
        if isinstance(value, torch.Tensor):
            signature[name] = "*" + {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[value.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif value == 1:
            signature[name] = "constexpr"
            consts[name] = 1
        else:
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    for name in kw:
        signature[name] = "constexpr"
    compiled = triton.compile(
        ASTSource(jit, signature, consts, attrs),
        target=GPUTarget("cuda", 90, 32),
        options=dict(num_warps=num_warps, maxnreg=maxnreg),
    )
    tmp = tempfile.mkdtemp()
    Path(tmp, "k.cubin").write_bytes(compiled.asm["cubin"])
    tools = Path(os.path.dirname(triton.__file__)) / "backends" / "nvidia" / "bin"
    sass = subprocess.run([tools / "cuobjdump", "-sass", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    usage = subprocess.run([tools / "cuobjdump", "-res-usage", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    if dump:
        Path(dump + ".sass").write_text(sass)
        Path(dump + ".ttgir").write_text(compiled.asm["ttgir"])
    print(
        "grid",
        rec.grid,
        "warps",
        num_warps,
        "stages",
        kw["NUM_STAGES"],
        "shared bytes",
        compiled.metadata.shared,
        re.findall(r"REG:\d+|STACK:\d+|LOCAL:\d+", usage),
    )
    lines = [line for line in sass.splitlines() if ADDRESS.match(line)]
    address = [int(ADDRESS.match(line).group(1), 16) for line in lines]
    loops = []
    for line, at in zip(lines, address):
        target = re.search(r"BRA\s+(?:P\d, )?0x([0-9a-f]+)", line)
        if target and int(target.group(1), 16) < at:
            loops.append((int(target.group(1), 16), at))
    print("instructions", len(lines))
    for start, end in loops:
        body = [opcode(line) for line, at in zip(lines, address) if start <= at <= end]
        if len(body) > 40:
            mix = collections.Counter(body).most_common(24)
            print(f"loop {len(body)} instructions:", ", ".join(f"{k}:{v}" for k, v in mix))


if __name__ == "__main__":
    main()
