"""The flash attention, IKBO linear compression and IKBO target attention reference kernels under
the Triton interpreter.

Every check draws random inputs (seeded per test, the seed printed on failure: tests/seeding.py),
runs ModelNew while torch.empty & co. hand out NaN-filled memory (an unwritten element fails), and
compares with the spec's reference module run in float64 on the same rounded inputs. Shapes are tiny
and deliberately ragged (sequence, K, N and M not multiples of the blocks, Lq not a power of two,
uneven and unsorted candidate-to-user maps), and both the TMA-descriptor and the pointer paths run.
A seeded sample of TUNABLES combinations is written into the CONFIG line the way the search rewrites
it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from kernelevolve.knowledge.frontmatter import kernel_docstring, split_front_matter
from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS
from kernelevolve.spec import load_spec

from .conftest import LaunchSpy, load_kernel, load_reference, poisoned_allocations  # noqa: E402

KERNELS = ["flash_attention", "ikbo_lce", "ikbo_target_attention"]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TMA = {"tma": {"USE_TMA": True}, "pointers": {"USE_TMA": False}}


def check(name: str, kernel, model_args: list, inputs: list, dtype: torch.dtype, reference=None):
    """ModelNew(*inputs) against the reference Model in float64 on the same rounded inputs."""
    tol = load_spec(SPECS / f"{name}.yaml").tolerance(str(dtype).removeprefix("torch."))
    reference = reference or load_reference(name)
    with torch.no_grad(), poisoned_allocations():
        out = kernel.ModelNew(*model_args)(*inputs)
    as64 = [x.double() if x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        expected = reference.Model(*model_args)(*as64)
    assert out.dtype == dtype and out.shape == expected.shape
    assert torch.isfinite(out).all(), "unwritten (NaN) or non-finite output"
    torch.testing.assert_close(out.double(), expected, atol=tol.atol, rtol=tol.rtol)


def rand(*shape, dtype):
    return torch.randn(*shape).to(dtype)


class Combinations(Sequence):
    """list(itertools.product(*values)), element by element: random.sample draws the same combinations
    from it without the list being made (ikbo_target_attention's TUNABLES have ~18 million, whose list
    took ~20 s of every pytest process that collected this file)."""

    def __init__(self, values: list[list]):
        self.values = values

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.values)

    def __getitem__(self, index: int) -> tuple:
        if not 0 <= index < len(self):
            raise IndexError(index)
        picked = []
        for v in reversed(self.values):  # the last key varies fastest, as in itertools.product
            index, i = divmod(index, len(v))
            picked.append(v[i])
        return tuple(reversed(picked))


def sample_tunables(name: str, count: int, seed: int) -> list[dict]:
    declared = read_declared((KNOWLEDGE_BASE / "kernels" / f"{name}.py").read_text())
    keys = list(declared.tunables)
    combos = Combinations([declared.tunables[k] for k in keys])
    return [dict(zip(keys, c)) for c in random.Random(seed).sample(combos, count)]


# -- the files themselves ------------------------------------------------------------------------
@pytest.mark.parametrize("name", KERNELS)
def test_kernel_file_follows_the_convention(name):
    source = (KNOWLEDGE_BASE / "kernels" / f"{name}.py").read_text()
    header, body = split_front_matter(kernel_docstring(source, Path(name)), Path(name))
    assert header["kind"] == "kernels" and header["spec"] == name and body.strip()
    declared = read_declared(source)
    assert set(declared.config) == set(declared.tunables)
    for key, value in declared.config.items():
        assert value in declared.tunables[key], f"CONFIG[{key!r}] = {value!r} is not among its TUNABLES"
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    helpers = {p.stem for p in (KNOWLEDGE_BASE / "kernels").glob("_*.py")}  # shared by convention
    assert imports - helpers <= {
        "math",
        "torch",
        "torch.nn",
        "triton",
        "triton.language",
        "triton.tools.tensor_descriptor",
    }


@pytest.mark.parametrize("name", KERNELS)
def test_spec_counts_bytes_and_flops(name):
    spec = load_spec(SPECS / f"{name}.yaml")
    assert spec.dtypes == ["bfloat16"] and spec.baseline == "torch.compile" and spec.budget.nodes == 30
    for case in spec.cases("cuda") + spec.cases("interpret"):
        nbytes, flops = spec.roofline(case)
        assert nbytes > 0 and flops > 0, case.label
    flops = [spec.roofline(c)[1] for c in spec.cases("cuda")]
    expected = SPEC_FLOPS[name]  # a kernel without an entry fails here, rather than skipping the check
    assert flops[: len(expected)] == expected


SPEC_FLOPS = {  # FLOPs of the first production shapes, worked out by hand
    "flash_attention": [4 * 4 * 32 * 4096**2 * 128, 2 * 4 * 32 * 4096**2 * 128],  # causal does half the dense work
    # the user half once per user (15 users), the candidate half per candidate
    "ikbo_lce": [2 * 433 * 256 * (1024 * 866 + 15 * 1178)],
    "ikbo_target_attention": [4 * 2048 * 2 * 64 * 1024 * 128],
}


def test_lce_reference_is_the_split_weight_sum():
    """The reference (broadcast, concat, matmul) equals W_user @ E_user[u(b)] + W_cand @ E_cand[b]."""
    ref = load_reference("ikbo_lce", B=5, M=6, K_USER=7, K_CAND=3, N=4, RATIO=2)
    user_emb, cand_emb, uid, weight = (x.double() if x.is_floating_point() else x for x in ref.get_inputs())
    assert uid.dtype == torch.int64 and uid.tolist() == [0, 0, 1, 1, 2] and user_emb.shape[0] == 3
    out = ref.Model()(user_emb, cand_emb, uid, weight)
    for b in range(5):
        expected = weight[:, :7] @ user_emb[uid[b]] + weight[:, 7:] @ cand_emb[b]
        torch.testing.assert_close(out[b], expected)


def test_target_attention_reference_is_per_candidate_sdpa():
    ref = load_reference("ikbo_target_attention", NUM_CANDIDATES=5, NUM_USERS=2, HEADS=2, HEAD_DIM=8, Q_LEN=3, KV_LEN=6)
    q, k, v, uid = ref.get_inputs()
    assert uid.tolist() == [0, 0, 0, 1, 1]
    out = ref.Model()(q.double(), k.double(), v.double(), uid)
    for c in range(5):
        u = uid[c]
        scores = q[c].double() @ k[u].double().transpose(-1, -2) / math.sqrt(8)
        torch.testing.assert_close(out[c], torch.softmax(scores, -1) @ v[u].double())


# -- flash attention -----------------------------------------------------------------------------
FA_CASES = [  # (B, H, S, D, dtype, BLOCK_M, BLOCK_N): S ragged against both blocks
    (1, 2, 37, 64, "bfloat16", 32, 32),
    (2, 1, 50, 128, "float16", 64, 32),
    (1, 1, 45, 40, "float32", 32, 64),  # head dim padded to 64
    (1, 2, 64, 64, "float16", 64, 64),  # every tile full: the unmasked paths only
]


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("path", TMA)
@pytest.mark.parametrize("case", FA_CASES, ids=lambda c: f"S{c[2]}-D{c[3]}-{c[4]}")
def test_flash_attention(case, path, causal, tmp_path):
    b, h, s, d, dtype_name, block_m, block_n = case
    dtype = DTYPES[dtype_name]
    kernel = load_kernel("flash_attention", tmp_path, BLOCK_M=block_m, BLOCK_N=block_n, **TMA[path])
    check("flash_attention", kernel, [causal], [rand(b, h, s, d, dtype=dtype) for _ in range(3)], dtype)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_flash_attention_lazy_rescale(causal, tmp_path):
    """LAZY_RESCALE keeps a stale running max (rescaling only past 2^8): scores spread over a wide range
    (the max grows along the keys, both within and beyond the threshold) still give the exact output."""
    kernel = load_kernel("flash_attention", tmp_path, BLOCK_M=32, BLOCK_N=16, LAZY_RESCALE=True)
    q, k, v = (rand(1, 2, 70, 32, dtype=torch.float32) for _ in range(3))
    k = k * torch.linspace(0.1, 6.0, 70)[:, None]  # later keys give larger scores
    check("flash_attention", kernel, [causal], [q, k, v], torch.float32)


def test_flash_attention_causal_rows_see_only_the_past(tmp_path):
    """Changing the last key/value must leave every earlier causal row untouched."""
    kernel = load_kernel("flash_attention", tmp_path, BLOCK_M=32, BLOCK_N=32)
    q, k, v = (rand(1, 1, 40, 32, dtype=torch.float16) for _ in range(3))
    with torch.no_grad():
        before = kernel.ModelNew(True)(q, k, v)
        k[..., -1, :] += 3.0
        v[..., -1, :] -= 3.0
        after = kernel.ModelNew(True)(q, k, v)
    assert torch.equal(before[..., :-1, :], after[..., :-1, :]) and not torch.equal(
        before[..., -1, :], after[..., -1, :]
    )


@pytest.mark.parametrize("config", sample_tunables("flash_attention", 6, seed=1), ids=str)
def test_flash_attention_tunables(config, tmp_path):
    kernel = load_kernel("flash_attention", tmp_path, **config)
    check("flash_attention", kernel, [True], [rand(1, 1, 41, 64, dtype=torch.float16) for _ in range(3)], torch.float16)


def test_flash_attention_rejects_mismatched_shapes(tmp_path):
    kernel = load_kernel("flash_attention", tmp_path)
    with pytest.raises(ValueError, match="must share one"):
        kernel.ModelNew(False)(torch.randn(1, 1, 8, 16), torch.randn(1, 1, 9, 16), torch.randn(1, 1, 9, 16))


# -- IKBO linear compression ---------------------------------------------------------------------
def lce_inputs(cand_to_user: list[int], m: int, k_user: int, k_cand: int, n: int, dtype):
    users = max(cand_to_user) + 1
    return [
        rand(users, k_user, n, dtype=dtype),
        rand(len(cand_to_user), k_cand, n, dtype=dtype),
        torch.tensor(cand_to_user, dtype=torch.int64),
        (torch.randn(m, k_user + k_cand) / math.sqrt(k_user + k_cand)).to(dtype),
    ]


LCE_CASES = [  # (cand_to_user, M, K_user, K_cand, N, dtype, BLOCK_M, BLOCK_N, BLOCK_K)
    ([0, 0, 0, 1, 2, 2, 2], 20, 13, 11, 24, "bfloat16", 64, 64, 32),  # uneven ratios, all K and N ragged
    ([1, 1, 0, 2, 0], 80, 21, 35, 48, "float16", 64, 64, 32),  # unsorted; M = 64 + a 16-row tail tile
    ([0, 1, 1, 1], 33, 40, 19, 20, "float16", 64, 64, 32),  # N*2 bytes not 16-aligned: TMA falls back
    ([0, 0, 1], 70, 16, 32, 32, "float32", 64, 64, 32),  # K exact multiples; 64 + 16-row tail
]


@pytest.mark.parametrize("path", TMA)
@pytest.mark.parametrize("case", LCE_CASES, ids=lambda c: f"B{len(c[0])}-M{c[1]}-N{c[4]}-{c[5]}")
def test_ikbo_lce(case, path, tmp_path):
    cand_to_user, m, k_user, k_cand, n, dtype_name, block_m, block_n, block_k = case
    dtype = DTYPES[dtype_name]
    kernel = load_kernel("ikbo_lce", tmp_path, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, **TMA[path])
    check("ikbo_lce", kernel, [], lce_inputs(cand_to_user, m, k_user, k_cand, n, dtype), dtype)


@pytest.mark.parametrize("config", sample_tunables("ikbo_lce", 5, seed=2), ids=str)
def test_ikbo_lce_tunables(config, tmp_path):
    kernel = load_kernel("ikbo_lce", tmp_path, **config)
    check("ikbo_lce", kernel, [], lce_inputs([0, 0, 1, 2, 2], 72, 21, 19, 40, torch.float16), torch.float16)


def test_ikbo_lce_spec_interpret_shapes_with_default_config(tmp_path):
    spec = load_spec(SPECS / "ikbo_lce.yaml")
    kernel = load_kernel("ikbo_lce", tmp_path)
    for shape in spec.interpret_shapes:
        ref = load_reference("ikbo_lce", **shape)
        torch.manual_seed(sum(shape.values()))
        inputs = [x.to(torch.bfloat16) if x.is_floating_point() else x for x in ref.get_inputs()]
        check("ikbo_lce", kernel, [], inputs, torch.bfloat16, reference=ref)


def test_ikbo_lce_reads_strided_inputs_in_place(tmp_path):
    """Embeddings as the first N columns of NaN-padded wider tensors, the weight transposed (columns
    M apart) and cand_to_user as every other element of a longer vector (the gaps name other users):
    the reference's result, with the caller's own tensors passed to the kernels (no copy)."""
    kernel = load_kernel("ikbo_lce", tmp_path, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, USE_TMA=True)
    user_emb, cand_emb, uid, weight = lce_inputs([1, 0, 0, 2, 1], 40, 24, 20, 36, torch.float16)
    user_emb, cand_emb = (
        torch.cat([t, torch.full_like(t[..., :8], float("nan"))], -1)[..., :36] for t in (user_emb, cand_emb)
    )
    weight = weight.t().contiguous().t()
    uid = torch.stack([uid, (uid + 1) % 3], 1)[:, 0]
    pad, gemm = kernel._pad_weight_halves, kernel._compress_gemm = (
        LaunchSpy(kernel._pad_weight_halves),
        LaunchSpy(kernel._compress_gemm),
    )
    check("ikbo_lce", kernel, [], [user_emb, cand_emb, uid, weight], torch.float16)
    assert pad.launches[0][0].data_ptr() == weight.data_ptr()
    assert [launch[2].data_ptr() for launch in gemm.launches] == [user_emb.data_ptr(), cand_emb.data_ptr()]
    assert all(launch[-1].data_ptr() == uid.data_ptr() for launch in gemm.launches)


def test_ikbo_lce_rejects_mismatched_shapes(tmp_path):
    kernel = load_kernel("ikbo_lce", tmp_path)
    user_emb, cand_emb, uid, weight = lce_inputs([0, 1], 8, 4, 4, 16, torch.float32)
    with pytest.raises(ValueError, match="shapes do not match"):
        kernel.ModelNew()(user_emb, cand_emb, uid, weight[:, :-1])


# -- IKBO target attention -----------------------------------------------------------------------
def ta_inputs(cand_to_user: list[int], heads: int, q_len: int, kv_len: int, head_dim: int, dtype):
    users = max(cand_to_user) + 1
    return [
        rand(len(cand_to_user), heads, q_len, head_dim, dtype=dtype),
        rand(users, heads, kv_len, head_dim, dtype=dtype),
        rand(users, heads, kv_len, head_dim, dtype=dtype),
        torch.tensor(cand_to_user, dtype=torch.int64),
    ]


TA_CASES = [  # (cand_to_user, H, Lq, Lkv, D, dtype, BLOCK_M, BLOCK_N)
    ([0, 0, 1, 1, 1], 2, 7, 24, 16, "float16", 32, 16),  # 4 candidates per tile, one tile straddles users
    ([2, 0, 0, 1, 1, 1, 2, 2, 0], 1, 8, 40, 64, "bfloat16", 32, 32),  # unsorted: user 2 and 0 return within a tile
    ([0, 0, 0, 0, 1, 1], 2, 20, 17, 32, "float32", 16, 16),  # Lq > BLOCK_M: two query tiles per candidate
    ([0, 1, 1, 1], 1, 3, 33, 128, "float16", 64, 32),  # 16 candidate slots per tile, mostly empty
]


@pytest.mark.parametrize("path", TMA)
@pytest.mark.parametrize("case", TA_CASES, ids=lambda c: f"C{len(c[0])}-Lq{c[2]}-Lkv{c[3]}-D{c[4]}-{c[5]}")
def test_ikbo_target_attention(case, path, tmp_path):
    cand_to_user, heads, q_len, kv_len, head_dim, dtype_name, block_m, block_n = case
    dtype = DTYPES[dtype_name]
    kernel = load_kernel("ikbo_target_attention", tmp_path, BLOCK_M=block_m, BLOCK_N=block_n, **TMA[path])
    check("ikbo_target_attention", kernel, [], ta_inputs(cand_to_user, heads, q_len, kv_len, head_dim, dtype), dtype)


@pytest.mark.parametrize("block_m", [32, 128])
def test_ikbo_target_attention_persistent(block_m, tmp_path):
    """PERSISTENT: a grid of k programs per SM (4 SMs under the interpreter), each looping over
    tiles, over more tiles than programs; with 128-row tiles (two 64-query slots of one candidate
    each) some tiles straddle users and the index is unsorted. MAXNREG and PREFETCH (inline PTX) are
    GPU-only and left out here; the evict-first hints of STREAM_QO run."""
    kernel = load_kernel(
        "ikbo_target_attention",
        tmp_path,
        BLOCK_M=block_m,
        BLOCK_N=16,
        PERSISTENT=1,
        MAXNREG=128,
        USE_TMA=True,
        PREFETCH=1,
        STREAM_QO=True,
    )
    inputs = ta_inputs([0, 0, 1, 1, 1, 2, 0, 2, 2, 1, 0], 2, 33, 24, 16, torch.float16)
    check("ikbo_target_attention", kernel, [], inputs, torch.float16)


@pytest.mark.parametrize("cand_to_user", [[0, 0, 1, 1, 1], [0, 1, 1, 0, 2, 2]], ids=["sorted", "mixed-pairs"])
def test_ikbo_target_attention_warp_specialized_path(cand_to_user, tmp_path):
    """WARP_SPECIALIZE: _ikbo_ws_fwd on head-major Q (two 64-query candidates a tile against the
    first one's user), then the FIXUP launch redoing the second candidate of every pair whose users
    differ; an odd candidate count leaves the last pair half empty."""
    kernel = load_kernel("ikbo_target_attention", tmp_path, BLOCK_N=16, WARP_SPECIALIZE=True, USE_TMA=True)
    spy = kernel._ikbo_ws_fwd = LaunchSpy(kernel._ikbo_ws_fwd)
    check("ikbo_target_attention", kernel, [], ta_inputs(cand_to_user, 2, 64, 32, 64, torch.bfloat16), torch.bfloat16)
    assert len(spy.launches) == 1


@pytest.mark.parametrize("config", sample_tunables("ikbo_target_attention", 5, seed=3), ids=str)
def test_ikbo_target_attention_tunables(config, tmp_path):
    kernel = load_kernel("ikbo_target_attention", tmp_path, **config)
    inputs = ta_inputs([0, 0, 0, 1, 2, 2], 1, 6, 21, 32, torch.float16)
    check("ikbo_target_attention", kernel, [], inputs, torch.float16)


def test_ikbo_target_attention_reads_strided_inputs_in_place(tmp_path):
    """q, k, v as the first D columns of NaN-padded wider tensors and cand_to_user as every other
    element of a longer vector (the gaps name other users): the reference's result, from the
    caller's own tensors (no copy; K/V too strided for TMA take the pointer path)."""
    kernel = load_kernel("ikbo_target_attention", tmp_path, BLOCK_M=32, BLOCK_N=16, USE_TMA=True)
    q, k, v, uid = ta_inputs([0, 0, 1, 1, 1, 2, 0], 2, 7, 24, 16, torch.float16)
    q, k, v = (torch.cat([t, torch.full_like(t[..., :8], float("nan"))], -1)[..., :16] for t in (q, k, v))
    uid = torch.stack([uid, (uid + 1) % 3], 1)[:, 0]
    spy = kernel._ikbo_target_attention_fwd = LaunchSpy(kernel._ikbo_target_attention_fwd)
    check("ikbo_target_attention", kernel, [], [q, k, v, uid], torch.float16)
    (launched,) = spy.launches
    # q, k, v, (out), uid, then k and v again as the L2 prefetch's plain pointers
    assert [t.data_ptr() for t in launched[:3] + launched[4:]] == [t.data_ptr() for t in (q, k, v, uid, k, v)]


def test_ikbo_target_attention_rejects_mismatched_shapes(tmp_path):
    kernel = load_kernel("ikbo_target_attention", tmp_path)
    q, k, v, uid = ta_inputs([0, 1], 2, 4, 8, 16, torch.float32)
    with pytest.raises(ValueError, match="shapes do not match"):
        kernel.ModelNew()(q, k[:, :1], v[:, :1], uid)
