"""Compile int8_mqa_decode's kernel for sm_90a on a machine without a GPU and summarise its SASS:
registers, shared memory, and the instruction mix of each loop (how the instruction counts per KV step in
bench/results/int8_mqa_decode/h200/2026-11-23_split_kv_tl_kernel/README.md were taken). Needs only Triton's bundled ptxas and cuobjdump.

    python bench/investigations/int8_mqa_decode/decode_sass.py [B=64 KV=4096 QL=1] [CONFIG_KEY=VALUE ...] [DUMP=/tmp/x]
"""

import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/, for benchlib
from benchlib import KERNELS, load_module  # noqa: E402

ADDRESS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/")


def opcode(line: str) -> str:
    text = re.sub(r"^\s+/\*[0-9a-f]+\*/\s+", "", line).split(";")[0]
    words = re.sub(r"^@!?U?P\w+\s+", "", text).split()
    return words[0] if words else ""


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    kernel = load_module(Path(args.pop("PATH", KERNELS / "int8_mqa_decode.py")), "decode_sass_kernel")
    batch, kv, q_len = int(args.pop("B", 64)), int(args.pop("KV", 4096)), int(args.pop("QL", 1))
    dump = args.pop("DUMP", "")
    config = kernel.CONFIG
    for key, value in args.items():
        config[key] = value in ("1", "True", "true") if isinstance(config[key], bool) else type(config[key])(value)
    heads, head_dim = 16, 128
    convert = config["CONVERT"]
    rows = max(16, triton.next_power_of_2(heads * q_len))
    if convert == "auto":
        convert = "f16" if rows < 64 else "cast"
    block_n = config["BLOCK_N"]
    n_tiles = -(-kv // block_n)
    splits = kernel.split_count(batch, n_tiles, 132, config)
    splits = -(-kv // (-(-n_tiles // splits) * block_n))
    consts = dict(
        Q_LEN=q_len, N_ROWS=heads * q_len, HEAD_DIM=head_dim, ROWS=rows, BLOCK_N=block_n, BLOCK_D=head_dim,
        EVEN=kv % block_n == 0, SPLIT=splits > 1, FUSED_COMBINE=splits > 1 and config["COMBINE"] == "last_program",
        PREFETCH_SCALES=bool(config["PREFETCH_SCALES"]), CONVERT=convert, ASM=convert != "cast",
        WARP_SPLIT=convert == "f16" and bool(config["WARP_SPLIT"]), WARPS=config["num_warps"],
        V_IN_REGS=convert == "f16" and bool(config["V_IN_REGS"]),
    )  # fmt: skip
    pointers = {"Q": "*bf16", "KC": "*i8", "KS": "*bf16", "VC": "*i8", "VS": "*bf16", "O": "*bf16",
                "PART_ACC": "*fp32", "PART_ML": "*fp32", "COUNTERS": "*i32"}  # fmt: skip
    ints = ["kv_len", "split_len", "stride_kb", "stride_vb", "stride_ksb", "stride_vsb"]
    signature = {**pointers, **dict.fromkeys(ints, "i32"), "qk_scale": "fp32", **dict.fromkeys(consts, "constexpr")}
    fn = kernel._int8_mqa_decode_split
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in [*pointers, *ints]}
    options = dict(num_warps=config["num_warps"], num_stages=config["num_stages"])
    compiled = triton.compile(
        ASTSource(fn, signature, consts, attrs), target=GPUTarget("cuda", 90, 32), options=options
    )
    tmp = tempfile.mkdtemp()
    Path(tmp, "k.cubin").write_bytes(compiled.asm["cubin"])
    tools = Path(os.path.dirname(triton.__file__)) / "backends" / "nvidia" / "bin"
    sass = subprocess.run([tools / "cuobjdump", "-sass", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    usage = subprocess.run([tools / "cuobjdump", "-res-usage", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    print("splits", splits, "grid", batch * splits, "shared bytes", compiled.metadata.shared)
    print(re.findall(r"REG:\d+|STACK:\d+|LOCAL:\d+", usage))
    if dump:
        Path(dump + ".sass").write_text(sass)
        Path(dump + ".ttgir").write_text(compiled.asm["ttgir"])
    lines = [line for line in sass.splitlines() if ADDRESS.match(line)]
    address = [int(ADDRESS.match(line).group(1), 16) for line in lines]
    loops = []  # a branch back to a lower address closes a loop
    for line, at in zip(lines, address):
        target = re.search(r"BRA\s+(?:P\d, )?0x([0-9a-f]+)", line)
        if target and int(target.group(1), 16) < at:
            loops.append((int(target.group(1), 16), at))
    print("instructions", len(lines), "loops", [(hex(a), hex(b), (b - a) // 16 + 1) for a, b in loops])
    for start, end in loops:
        body = [opcode(line) for line, at in zip(lines, address) if start <= at <= end]
        if len(body) > 40:
            mix = collections.Counter(body).most_common(40)
            print(f"loop {hex(start)}-{hex(end)}: {len(body)} instructions:", ", ".join(f"{k}:{v}" for k, v in mix))


if __name__ == "__main__":
    main()
