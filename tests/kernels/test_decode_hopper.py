"""knowledge_base/kernels/_decode_hopper.py, the register-resident Gluon int8 MQA decode kernel, on a CPU machine.

Gluon has no interpreter: its results are checked on a GPU (bench/kernels/int8_mqa_decode/decode_regs_run.py). Here: the V-pair
inline PTX is emulated over every code, the decode file keeps its tl kernel wherever the Gluon kernel
cannot run, and the kernel compiles for sm_90a into the loop it was designed as (codes by cp.async into
shared memory and back in 16-byte reads, int8 MMA for q K^T, fp16 MMA for P V, no spills).
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from kernelevolve.paths import KNOWLEDGE_BASE
from tests.kernels.sm90 import tool

from .conftest import load_kernel, poisoned_allocations
from .test_int8_mqa_attention import assert_matches, expected_of, inputs, prmt

KERNELS = KNOWLEDGE_BASE / "kernels"


def _half(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def test_v_pairs_ptx_gives_key_pairs_of_code_plus_1152():
    """Two words of codes (4 dims of key a, the same dims of key b) -> four fp16x2 registers, register m
    holding (key a, key b) of dim m, each value code + 1152 exactly (the bias the kernel removes with the
    sum of P). Emulated from the kernel source's own PTX over every code in every position."""
    source = (KERNELS / "_decode_hopper.py").read_text()
    asm = source[source.index("_V_PAIRS_PTX = ") :].split('"""', 2)[1]
    xors = re.findall(r"xor\.b32 (\w+), \$(\d), (0x[0-9a-fA-F]+);", asm)
    inter = re.findall(r"prmt\.b32 (lo|hi), a, b, (0x[0-9a-fA-F]+);", asm)
    outs = re.findall(r"prmt\.b32 \$(\d), (lo|hi), (0x[0-9a-fA-F]+), (0x[0-9a-fA-F]+);", asm)
    assert len(xors) == 2 and len(inter) == 2 and len(outs) == 4, asm
    rng = np.random.default_rng(0)
    for code in range(-128, 128):
        for pos in range(8):
            codes = rng.integers(-128, 128, size=8)
            codes[pos] = code
            words = {"4": 0, "5": 0}
            for i, c in enumerate(codes):
                words["4" if i < 4 else "5"] |= (int(c) & 0xFF) << (8 * (i % 4))
            reg = {name: words[src] ^ int(mask, 16) for name, src, mask in xors}
            reg.update({name: prmt(reg["a"], reg["b"], int(sel, 16)) for name, sel in inter})
            got = {int(n): prmt(reg[src], int(const, 16), int(sel, 16)) for n, src, const, sel in outs}
            for m in range(4):
                lo, hi = _half(got[m] & 0xFFFF), _half(got[m] >> 16)
                assert (lo, hi) == (codes[m] + 1152, codes[4 + m] + 1152), (codes, m, lo, hi)


def test_gluon_only_where_the_batch_fits_one_wave(tmp_path):
    """REGS_ONE_WAVE: a batch within one wave of REGS_CTAS_PER_SM programs an SM takes REGS_WARPS warps, one
    within one wave of the REGS_WIDE_ pair those, a larger one the tl kernel (the interpreter's device counts 4
    SMs); without REGS_ONE_WAVE, every batch the first."""
    config = dict(REGS_WARPS=8, REGS_CTAS_PER_SM=1, REGS_WIDE_WARPS=4, REGS_WIDE_CTAS_PER_SM=3)
    kernel = load_kernel("int8_mqa_decode", tmp_path, REGS_ONE_WAVE=True, **config)
    batch = lambda b: torch.zeros(b, 16, 1, 128)  # noqa: E731
    assert [kernel._gluon_batch(batch(b)) for b in (1, 4, 5, 12, 13)] == [(8, 1), (8, 1), (4, 3), (4, 3), None]
    kernel = load_kernel("int8_mqa_decode", tmp_path, REGS_ONE_WAVE=False, **config)
    assert kernel._gluon_batch(batch(13)) == (8, 1)


def test_gluon_kernel_only_on_the_triton_it_is_written_for(monkeypatch):
    """The Gluon decode kernel does not compile on Triton 3.9 (its Gluon API differs): usable() is False
    there for inputs it takes on 3.6, so IMPL auto (the default) keeps the tl kernel rather than failing.
    Stand-ins for CUDA tensors on a Hopper GPU (none here)."""
    import triton

    class OnHopper:
        is_cuda, device = True, "cuda:0"

        def __init__(self, shape, dtype, ptr=1 << 20):
            self.shape, self.dtype, self.ptr = shape, dtype, ptr

        def data_ptr(self):
            return self.ptr

        def stride(self, dim):
            return self.shape[-1] * (128 if len(self.shape) == 3 else 1)

    q = OnHopper((2, 16, 1, 128), torch.bfloat16)
    kc, ks = OnHopper((2, 64, 128), torch.int8), OnHopper((2, 64), torch.bfloat16)
    sys.path.insert(0, str(KERNELS))
    try:
        import _decode_hopper

        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
        monkeypatch.setattr(triton, "__version__", "3.6.0")
        assert _decode_hopper.usable(q, kc, ks, kc, ks)  # what it serves on the Triton it is written for
        # q comes by 16-byte cp.async copies too: a q 8 bytes off (a view into a larger buffer) keeps the tl kernel
        assert not _decode_hopper.usable(OnHopper(q.shape, q.dtype, ptr=(1 << 20) + 8), kc, ks, kc, ks)
        monkeypatch.setattr(triton, "__version__", "3.9.0")
        assert not _decode_hopper.usable(q, kc, ks, kc, ks)
    finally:
        sys.path.remove(str(KERNELS))


def test_decode_auto_keeps_the_tl_kernel_off_hopper(tmp_path):
    """IMPL auto on the CPU interpreter (no Hopper GPU): the tl kernel runs and is right."""
    kernel = load_kernel("int8_mqa_decode", tmp_path, IMPL="auto", BLOCK_N=32)
    xs, ref = inputs("int8_mqa_decode", BATCH=2, KV_LEN=64, Q_LEN=1, Q_HEADS=16, HEAD_DIM=32)
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew()(*xs)
    assert_matches("int8_mqa_decode", out, expected_of(ref, xs))
    sys.path.insert(0, str(KERNELS))
    try:
        import _decode_hopper

        q, kc, ks, vc, vs = xs
        assert not _decode_hopper.usable(q, kc, ks, vc, vs)  # CPU tensors
    finally:
        sys.path.remove(str(KERNELS))


COMPILE = """
import _decode_hopper as dh
batch, kv = 4, 1000  # a KV length no step divides: the masked copies
q = torch.empty(batch, 16, 1, 128, dtype=torch.bfloat16)
codes = torch.empty(batch, 1024, 128, dtype=torch.int8)
scales = torch.empty(batch, 1024, dtype=torch.bfloat16)
part = torch.empty(16, dtype=torch.float32)
kernel = dh._decode_regs_kernel.warmup(
    q, codes, scales, codes, scales, q, part, part, torch.empty(1, dtype=torch.int32),
    kv, 256, 1024 * 128, 1024 * 128, 1024, 1024, 0.1,
    W=int(sys.argv[3]), NK=32, STAGES=2, LAZY=sys.argv[4] == "lazy", SPLIT=True, EVEN=False, num_warps=int(sys.argv[3]),
    grid=(1,),
)
open(sys.argv[2], "wb").write(kernel.asm["cubin"])
"""


@pytest.mark.skipif(not tool("nvdisasm").exists(), reason="Triton's nvdisasm not shipped here")
@pytest.mark.xdist_group("sm90")  # the session's one compile interpreter (conftest.py: sm90)
# 8 warps: the default (int8_mqa_decode.CONFIG["REGS_WARPS"]); 4: REGS_WIDE_WARPS; lazy: REGS_LAZY_RESCALE
@pytest.mark.parametrize("warps, rescale", [(4, "always"), (8, "always"), (8, "lazy")])
def test_compiles_for_sm90_to_the_designed_loop(tmp_path, sm90, warps, rescale):
    import triton

    if not triton.__version__.startswith("3.6."):
        # the Gluon layouts and cp.async API used here are those of Triton 3.6, the release measured on the H200
        pytest.skip(f"the Gluon decode kernel is built for Triton 3.6 (this is {triton.__version__})")
    cubin = tmp_path / "k.cubin"
    sm90.run(COMPILE, [str(KERNELS), str(cubin), str(warps), rescale])
    usage = subprocess.run(
        [tool("cuobjdump"), "--dump-resource-usage", cubin], capture_output=True, text=True, check=True
    ).stdout
    assert "LOCAL:0" in usage and "STACK:0" in usage, usage  # no spills
    sass = subprocess.run([tool("nvdisasm"), "-c", cubin], capture_output=True, text=True, check=True).stdout
    # the key loop: the longest backward branch
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", line))}
    loops = [
        (i - labels[m.group(1)], labels[m.group(1)], i)
        for i, line in enumerate(lines)
        if (m := re.search(r"BRA `\((\.L_x_\d+)\)", line)) and labels.get(m.group(1), i) < i
    ]
    _, start, end = max(loops)
    loop = "\n".join(lines[start : end + 1])
    # per thread and 32-key step: 8 x 16 bytes of K and 8 of V, copied by cp.async, read back 16 bytes at a time
    assert loop.count("LDGSTS.E.BYPASS.128") == 16 and loop.count("LDS.128") == 16, loop
    assert "LDG.E.128" not in loop  # no code held in registers across steps (ptxas sank such loads)
    assert loop.count("IMMA.16832.S8.S8") == 32  # q hi and lo against 4 n-tiles x 4 k-steps of K
    assert loop.count("HMMA.16816.F32") == 34  # 2 k-steps x (16 n-tiles of V + the sum of P)
    # no operand written back to shared memory; the lazy rescale's program-wide condition (a max over the
    # warps) goes through it as single words
    assert not re.search(r"\bSTS" if rescale == "always" else r"\bSTS\.(64|128)", loop), loop


STAMPED = """
sys.path.insert(0, sys.argv[2])
import decode_timeline
mod = decode_timeline.load(decode_timeline.instrumented_source())
q = torch.empty(4, 16, 1, 128, dtype=torch.bfloat16)
codes = torch.empty(4, 1024, 128, dtype=torch.int8)
scales = torch.empty(4, 1024, dtype=torch.bfloat16)
part = torch.empty(16, dtype=torch.float32)
for split in (False, True):
    kernel = mod._decode_regs_kernel.warmup(
        q, codes, scales, codes, scales, q, part, part, torch.empty(1, dtype=torch.int32),
        torch.empty(64, dtype=torch.int64), 1024, 512, 1024 * 128, 1024 * 128, 1024, 1024, 0.1,
        W=8, NK=32, STAGES=2, LAZY=False, SPLIT=split, EVEN=True, num_warps=8, grid=(1,),
    )
    open(sys.argv[3], "a").write(str(kernel.asm["ptx"].count("%globaltimer")) + " ")
"""


@pytest.mark.xdist_group("sm90")  # the session's one compile interpreter (conftest.py: sm90)
def test_timeline_stamps_a_copy_of_the_kernel_that_compiles(tmp_path, sm90):
    """bench/investigations/int8_mqa_decode/decode_timeline.py inserts its stamps at lines of _decode_hopper.py: they must still be there, and
    the stamped copy must compile for sm_90a with five timer reads (start, q ready, loop done, merged, end),
    with and without splits."""
    import triton

    if not triton.__version__.startswith("3.6."):
        pytest.skip(f"the Gluon decode kernel is built for Triton 3.6 (this is {triton.__version__})")
    folder = KERNELS.parents[1] / "bench" / "investigations" / "int8_mqa_decode"
    out = tmp_path / "counts.txt"
    sm90.run(STAMPED, [str(KERNELS), str(folder), str(out)])
    assert out.read_text().split() == ["5", "5"]
