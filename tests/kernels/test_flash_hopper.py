"""knowledge_base/kernels/_flash_hopper.py (with _flash_hopper_ws.py and _flash_hopper_softmax.py), the Gluon
flash-attention kernels for Hopper, on a CPU machine.

Gluon has no interpreter, so the kernel's results are checked on a GPU (bench/kernels/flash_attention/hopper_attention_check.py,
bench/kernels/attention/attention_bench.py). Here: the callers fall back to their tl kernels off Hopper, and the kernel
compiles for sm_90a (the JIT pointed at a Hopper target) into code whose main loop runs the softmax's
exponentials while the P V wgmma is in flight, i.e. before the wait for it (ptxas hoists a plain
wgmma wait above them), without spills.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from kernelevolve.paths import KNOWLEDGE_BASE
from tests.kernels.sm90 import tool

KERNELS = KNOWLEDGE_BASE / "kernels"


@pytest.fixture
def hopper():
    sys.path.insert(0, str(KERNELS))
    try:
        import _flash_hopper

        yield _flash_hopper
    finally:
        sys.path.remove(str(KERNELS))


def test_not_usable_off_hopper(hopper):
    q = torch.zeros(1, 2, 64, 128, dtype=torch.bfloat16)
    assert not hopper.usable(q, q, q)  # CPU tensors (and, on a GPU, the interpreter) keep the tl kernels


def test_hopper_config_from_kernel_configs(hopper):
    for name in ("flash_attention", "int8_mqa_prefill"):
        text = (KERNELS / f"{name}.py").read_text()
        assert '"IMPL": ' in text and "_flash_hopper.hopper_config(CONFIG)" in text
    config = {
        "HOPPER_BLOCK_M": 128,
        "HOPPER_BLOCK_N": 64,
        "HOPPER_WARPS": 8,
        "HOPPER_STAGES": 3,
        "HOPPER_Q_IN_REGS": True,
    }
    expected = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "Q_IN_REGS": True}
    expected.update(WS=False, PERSISTENT=False, PERSISTENT_FULL=None, PINGPONG=False, LAZY=False)
    assert hopper.hopper_config(config) == expected


# Run in the compile interpreter (conftest.py: sm90): with TRITON_INTERPRET set when triton is imported (as
# in this suite), Gluon's own helper functions are interpreter objects and nothing compiles.
COMPILE = """
import _flash_hopper as hopper
batch, heads, seq, dim, rows = 1, 2, 4096, 128, 128
q = torch.empty(batch, heads, seq, dim, dtype=torch.bfloat16)


def desc(t):
    flat = t.view(-1, dim)
    layout = gl.NVMMASharedLayout.get_default_for([rows, dim], gl.bfloat16)
    return hopper.TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, dim], layout)


if sys.argv[3].startswith("ws"):  # warp-specialised, persistent (one loop over all tiles), ping-pong, causal
    kernel = hopper._flash_fwd_hopper_ws.warmup(
        desc(q), desc(q), desc(q), q, seq, 1, 0.1, seq // rows, heads * seq // rows // 2,
        CAUSAL=True, BLOCK_N=rows, HEAD_D=dim, STAGES=2, PERSISTENT=2, PINGPONG=True, LAZY=sys.argv[3] == "ws_lazy",
        num_warps=4, grid=(1,),
    )
else:
    kernel = hopper._flash_fwd_hopper.warmup(
        desc(q), desc(q), desc(q), q, seq, 1, 0.1,
        CAUSAL=True, BLOCK_M=rows, BLOCK_N=rows, HEAD_D=dim, STAGES=2, Q_IN_REGS=False, num_warps=8, grid=(1,),
    )
open(sys.argv[2], "wb").write(kernel.asm["cubin"])
"""


def _compile_sass(sm90, tmp_path, which: str) -> str:
    """The kernel compiled for sm_90a, its SASS; asserts no spills."""
    cubin = tmp_path / "k.cubin"
    sm90.run(COMPILE, [str(KERNELS), str(cubin), which])
    usage = subprocess.run(
        [tool("cuobjdump"), "--dump-resource-usage", cubin], capture_output=True, text=True, check=True
    ).stdout
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    assert regs <= 255 and "LOCAL:0" in usage and "STACK:0" in usage, usage  # no spills
    return subprocess.run([tool("nvdisasm"), "-c", cubin], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not tool("nvdisasm").exists(), reason="Triton's nvdisasm not shipped here")
@pytest.mark.xdist_group("sm90")  # the session's one compile interpreter (conftest.py: sm90)
def test_compiles_for_sm90_with_softmax_before_the_wait(tmp_path, sm90):
    sass = _compile_sass(sm90, tmp_path, "plain")
    # The key loop: after its wait for S_j (1 group left in flight), the exponentials of the tile come
    # before the wait for P_{j-1} V_{j-1} (0 left).
    loop = sass.split("WARPGROUP.DEPBAR.LE gsb0, 0x1")[1]
    before_wait = loop.split("WARPGROUP.DEPBAR.LE gsb0, 0x0")[0]
    assert before_wait.count("MUFU.EX2") >= 64, "softmax not overlapping the P V wgmma"


@pytest.mark.skipif(not tool("nvdisasm").exists(), reason="Triton's nvdisasm not shipped here")
@pytest.mark.xdist_group("sm90")  # the session's one compile interpreter (conftest.py: sm90)
def test_warp_specialised_pingpong_compiles_for_sm90(tmp_path, sm90):
    """The persistent ping-pong kernel (causal, PERSISTENT=2: one loop over all of a program's tiles): each
    consumer issues its wgmma only inside its turn (between bar.sync on its named barrier and bar.arrive on
    the other's), S_g and the previous tile's P V are both in flight before the wait for S_g (no
    serialising wait between them: ptxas inserts one for a branch it cannot prove uniform, or for
    accumulator registers written between two wgmma), the softmax overlaps P V, and the causal mask is not
    kept as packed predicate bits (the looped kernel's diagonal path had ~900 LOP3)."""
    import triton

    sass = _compile_sass(sm90, tmp_path, "ws")  # compiles without spills on every supported Triton
    if not triton.__version__.startswith("3.6."):
        # Triton 3.9 schedules this kernel differently (one turn without wgmma): the structure below is
        # that of Triton 3.6, the release the H200 measurements were made with.
        pytest.skip(f"ping-pong SASS structure checked on Triton 3.6 only (this is {triton.__version__})")
    events = re.findall(r"BAR\.SYNC\.DEFER_BLOCKING 0x[89]|BAR\.ARV 0x[89]|HGMMA", sass)
    turns = "".join("S" if e.startswith("BAR.SYNC") else "A" if e.startswith("BAR.ARV") else "g" for e in events)
    # Consumer 1 opens with its pass to consumer 0 and consumer 0 closes with a last wait; in between, every
    # turn (S ... A) issues wgmma, and no wgmma of the tile loops is issued outside a turn except the last
    # P V product of a block.
    assert turns.count("S") >= 3 and turns.count("A") >= 3, turns
    assert "SA" not in turns, turns  # a turn without wgmma
    assert sass.count("LOP3") < 400, sass.count("LOP3")
    # In the tile loop, two wgmma groups (16 HGMMA) between the turn's bar.sync and bar.arrive.
    assert re.search(r"Sg{16}A", turns), turns
    loop = sass.split("WARPGROUP.DEPBAR.LE gsb0, 0x1")[1]
    assert loop.split("WARPGROUP.DEPBAR.LE gsb0, 0x0")[0].count("MUFU.EX2") >= 32


@pytest.mark.skipif(not tool("nvdisasm").exists(), reason="Triton's nvdisasm not shipped here")
@pytest.mark.xdist_group("sm90")  # the session's one compile interpreter (conftest.py: sm90)
def test_lazy_rescale_skips_outside_the_turn(tmp_path, sm90):
    """HOPPER_LAZY (the default): O's rescale is one warp vote and a branch over its 64 multiplies, placed
    before the turn's bar.sync (no wgmma is in flight there, so ptxas adds no wait), and the turns still
    issue S and P V together (without it ptxas puts the multiplies inside the turn, between the two)."""
    import triton

    sass = _compile_sass(sm90, tmp_path, "ws_lazy")
    if not triton.__version__.startswith("3.6."):
        pytest.skip(f"ping-pong SASS structure checked on Triton 3.6 only (this is {triton.__version__})")
    assert "VOTE.ANY" in sass
    skip = sass.split("VOTE.ANY")[1]
    before_turn = re.split(r"BAR\.SYNC\.DEFER_BLOCKING 0x[89]", skip)[0]
    assert before_turn.count("FMUL") >= 64, before_turn.count("FMUL")
    assert "HGMMA" not in before_turn and "DEPBAR" not in before_turn
    events = re.findall(r"BAR\.SYNC\.DEFER_BLOCKING 0x[89]|BAR\.ARV 0x[89]|HGMMA", sass)
    turns = "".join("S" if e.startswith("BAR.SYNC") else "A" if e.startswith("BAR.ARV") else "g" for e in events)
    assert re.search(r"Sg{16}A", turns) and "SA" not in turns, turns
