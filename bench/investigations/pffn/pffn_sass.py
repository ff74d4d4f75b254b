"""Compile knowledge_base/kernels/pffn.py's kernels for sm_90a without a GPU (Triton's bundled ptxas /
cuobjdump) at one of specs/pffn.yaml's shapes (bfloat16) and print, per kernel launched: grid,
registers, shared memory, spills and the instruction mix of each loop, for CONFIG overrides:

    python bench/investigations/pffn/pffn_sass.py [B=256 N=200 D=256 K=160] [KEY=VALUE ...] [DUMP=/tmp/x]

The launch arguments are the ones pffn_forward passes (recorded from a CPU call with the kernels
replaced by recorders; GELU as a 16-bit CUDA input gets it).
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
import pffn as kernel  # noqa: E402

ADDRESS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/")
TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def opcode(line: str) -> str:
    text = re.sub(r"^\s+/\*[0-9a-f]+\*/\s+", "", line).split(";")[0]
    words = re.sub(r"^@!?U?P\w+\s+", "", text).split()
    return words[0] if words else ""


class Recorder:
    def __init__(self, jit, calls):
        self.jit, self.calls = jit, calls

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.calls.append((self.jit, grid, args, kwargs))

        return call


def compile_one(jit, grid, args, kwargs, dump):
    kw = dict(kwargs)
    num_warps = kw.pop("num_warps")
    signature, consts, attrs = {}, dict(kw), {}
    for i, (name, value) in enumerate(zip(jit.arg_names, args)):
        if isinstance(value, torch.Tensor):
            signature[name] = "*" + TYPES[value.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
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
        ASTSource(jit, signature, consts, attrs), target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps)
    )
    tmp = tempfile.mkdtemp()
    Path(tmp, "k.cubin").write_bytes(compiled.asm["cubin"])
    tools = Path(os.path.dirname(triton.__file__)) / "backends" / "nvidia" / "bin"
    sass = subprocess.run([tools / "cuobjdump", "-sass", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    usage = subprocess.run([tools / "cuobjdump", "-res-usage", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    if dump:
        Path(f"{dump}_{jit.__name__}.sass").write_text(sass)
        Path(f"{dump}_{jit.__name__}.ttgir").write_text(compiled.asm["ttgir"])
    print(
        jit.__name__,
        "grid",
        grid,
        "warps",
        num_warps,
        "shared bytes",
        compiled.metadata.shared,
        re.findall(r"REG:\d+|STACK:\d+|LOCAL:\d+", usage),
        "waits",
        re.findall(r"pendings = (\d+)", compiled.asm["ttgir"]),
    )
    lines = [line for line in sass.splitlines() if ADDRESS.match(line)]
    address = [int(ADDRESS.match(line).group(1), 16) for line in lines]
    print("  instructions", len(lines))
    for line, at in zip(lines, address):
        target = re.search(r"BRA\s+(?:P\d, )?0x([0-9a-f]+)", line)
        if target and int(target.group(1), 16) < at:
            start = int(target.group(1), 16)
            body = [opcode(x) for x, a in zip(lines, address) if start <= a <= at]
            if len(body) > 40:
                mix = collections.Counter(body).most_common(20)
                print(f"  loop {len(body)} instructions:", ", ".join(f"{k}:{v}" for k, v in mix))


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    dump = args.pop("DUMP", "")
    b, n, d, k = (int(args.pop(key, default)) for key, default in (("B", 256), ("N", 200), ("D", 256), ("K", 160)))
    for key, value in args.items():
        old = kernel.CONFIG[key]
        kernel.CONFIG[key] = value in ("1", "True", "true") if isinstance(old, bool) else type(old)(value)
    calls = []
    names = [name for name in dir(kernel) if name.startswith("_pffn") and name.endswith("kernel")]
    saved = {name: getattr(kernel, name) for name in names}
    for name in names:
        setattr(kernel, name, Recorder(saved[name], calls))
    os.environ.pop("TRITON_INTERPRET", None)
    bf = torch.bfloat16
    x = torch.zeros(b, n, d, dtype=bf)
    w1, w2 = torch.zeros(b, d, k, dtype=bf), torch.zeros(b, k, d, dtype=bf)
    kernel.pffn_forward(x, w1, w2, torch.zeros(k, dtype=bf), torch.ones(k, dtype=bf), torch.zeros(d, dtype=bf),
                        torch.ones(d, dtype=bf), 1e-6)  # fmt: skip
    for jit, grid, a, kw in calls:
        compile_one(jit, grid, a, kw, dump)


if __name__ == "__main__":
    main()
