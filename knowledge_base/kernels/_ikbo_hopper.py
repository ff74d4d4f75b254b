"""IKBO target attention for Hopper (sm_90) in Gluon: a loader warp and two consumer warpgroups,
one candidate each, used by ikbo_target_attention.py on a Hopper GPU (its tl kernel everywhere else).

Why: Triton 3.6's `tl.dot` loop waits for every wgmma before the softmax that follows it, so within
a program the exponentials (at D = 128 half the tensor-core time per score) never run under an MMA,
and `tl.range(warp_specialize=True)` only splits one contiguous 128-row Q tile, which [C, H, Lq, D]
queries do not give (H200, bench/results/ikbo_target_attention/h200/2026-11-23_tl_kernel_tuning/README.md).
Gluon exposes asynchronous wgmma, TMA copies, mbarriers and warp specialisation, so the structure
is written out (after FlashAttention-3 and the flash kernel in _flash_hopper.py):

- A work item is (a pair of consecutive candidates, one head). With Lq = 64 each candidate's queries
  at one head are one 64-row box of the [C * H * Lq, D] view of Q, so each consumer warpgroup TMA-loads
  its own candidate: no head-major copy of Q.
- The loader warp issues every TMA copy: both Q boxes, then the user's K/V tiles into STAGES-deep
  ring buffers, refilling a stage once both consumers have released it (mbarriers, two arrivals a
  phase). When the two candidates of a pair have different users (never with a sorted index and an
  even number of candidates per user) the loader streams the first user's tiles then the second's;
  each consumer computes on its own user's tiles and only releases the others.
- Each consumer runs the software-pipelined loop: issue S_j = Q K_j^T, rescale O, issue
  O += P_{j-1} V_{j-1}, wait for S_j only, exponentials of S_j while P V runs, then wait for P V.
  ptxas moves a plain `wgmma.wait_group` above the exponentials it should follow, so the wait is
  inline PTX behind a never-taken branch on the row sums (`_wgmma_wait_behind`, the trick of
  _flash_hopper._wait_after).
- PINGPONG: the two consumers take turns issuing their wgmma groups (named barriers, FA3's warp
  scheduler barriers), so that one's softmax runs while the other's products occupy the tensor cores.
- PERSISTENT: one program an SM walks the items; the loader runs ahead into the next item's Q and K/V.
- setmaxnreg: consumers 240 registers, the loader 32.

Not runnable under the Triton interpreter (Gluon has none): `usable()` says where it applies.
"""

import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from _hopper_gluon import tma_load as _tma_load
from _hopper_gluon import turn_pass as _turn_pass
from _hopper_gluon import turn_wait as _turn_wait
from _hopper_gluon import wgmma_wait_behind as _wgmma_wait_behind

ROWS = gl.constexpr(64)  # query rows a consumer warpgroup owns: one candidate's queries at one head


def usable(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cand_to_user: torch.Tensor) -> bool:
    """True where the Gluon kernel runs: a Hopper GPU (not the interpreter), 16-bit contiguous tensors,
    64 queries a candidate, head dim 64 or 128, 16-byte aligned bases."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return False
    if not (q.is_cuda and torch.cuda.get_device_capability(q.device)[0] == 9):
        return False
    if q.dtype not in (torch.bfloat16, torch.float16) or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    if q.shape[2] != ROWS.value or q.shape[3] not in (64, 128):
        return False
    if cand_to_user.dtype not in (torch.int32, torch.int64) or not cand_to_user.is_contiguous():
        return False
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v))


@gluon.jit
def _item(t, num_heads, num_cands, UID):
    """Work item t (pair-major, heads inner: items in flight share users, whose K/V stay in L2):
    (head, first candidate, its user, the second candidate's user)."""
    h = t % num_heads
    c0 = (t // num_heads) * 2
    u0 = gl.load(UID + c0)
    u1 = gl.load(UID + gl.minimum(c0 + 1, num_cands - 1))
    return h, c0, u0, u1


@gluon.jit
def _loader(
    q_desc,
    k_desc,
    v_desc,
    q_smem,
    k_smem,
    v_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    UID,
    num_cands,
    num_heads,
    kv_len,
    n_items,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
):
    """The loader warp: per item, both candidates' Q boxes (once the consumers hold the previous
    item's Q in registers), then K_t, V_t of each segment (one user, or two) into ring stage it % STAGES."""
    n_kv = gl.cdiv(kv_len, BLOCK_N)
    it = 0
    bi = 0
    step = gl.num_programs(0)  # PERSISTENT: items pid, pid + grid, ...; else the grid is one program an item
    for t in range(gl.program_id(0), n_items, step):
        h, c0, u0, u1 = _item(t, num_heads, num_cands, UID)
        mbarrier.wait(q_free, (bi & 1) ^ 1, pred=bi > 0)
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        _tma_load(q_desc, [(c0 * num_heads + h) * ROWS, 0], q_bar, q_smem.index(0))
        _tma_load(q_desc, [((c0 + 1) * num_heads + h) * ROWS, 0], q_bar, q_smem.index(1))
        n_seg = 1 + (u0 != u1).to(gl.int32)
        for seg in range(n_seg):
            user = gl.where(seg == 0, u0, u1)
            row0 = ((user * num_heads + h) * kv_len).to(gl.int32)
            for j in range(n_kv):
                stage = it % STAGES
                phase = ((it // STAGES) & 1) ^ 1  # the release of this stage's previous tile
                mbarrier.wait(k_free.index(stage), phase, pred=it >= STAGES)
                mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
                _tma_load(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(stage), k_smem.index(stage))
                mbarrier.wait(v_free.index(stage), phase, pred=it >= STAGES)
                mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
                _tma_load(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(stage), v_smem.index(stage))
                it += 1
        bi += 1


@gluon.jit
def _token():
    """A [128] int32 tensor with one element a thread of a warpgroup: the carrier of per-thread inline PTX."""
    return gl.full([128], 0, gl.int32, layout=gl.BlockedLayout([1], [32], [4], [0]))


@gluon.jit
def _softmax_step(s, m_i, l_i, cols, kv_len, qk_scale, masked):
    """Fold a raw score tile into the running (max, sum): P (fp32), O's rescale alpha, new max and sum.
    `masked` (runtime: the ragged last key tile) drops columns past kv_len (the next head's rows)."""
    if masked:
        s = gl.where(cols[None, :] < kv_len, s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    p = gl.exp2(s * qk_scale - m_new[:, None])  # scale * log2(e) in the exponent: one FMA a score
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def _release_tiles(k_ready, v_ready, k_free, v_free, it, n, STAGES: gl.constexpr):
    """Pass over n ring tiles meant for the other consumer: wait until each is there (so the release
    counts toward its phase), release it."""
    for j in range(n):
        cur = it + j
        mbarrier.wait(k_ready.index(cur % STAGES), (cur // STAGES) & 1)
        mbarrier.arrive(k_free.index(cur % STAGES))
        mbarrier.wait(v_ready.index(cur % STAGES), (cur // STAGES) & 1)
        mbarrier.arrive(v_free.index(cur % STAGES))
    return it + n


@gluon.jit
def _consumer(
    o_desc,
    o_smem,
    q_smem,
    k_smem,
    v_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    O,
    UID,
    num_cands,
    num_heads,
    kv_len,
    qk_scale,
    n_items,
    ME: gl.constexpr,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PINGPONG: gl.constexpr,
    DEFER_STORE: gl.constexpr,
    TMA_STORE: gl.constexpr,
):
    """Consumer warpgroup ME: candidate c0 + ME of each item, against its user's key tiles.
    DEFER_STORE: an item's output is normalised and stored after the next item's first Q K^T is issued
    (under that wgmma); O is not zeroed between items, the first tile's alpha = exp2(-inf) = 0 clears it."""
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_D, 16]
    )
    q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    rows = gl.arange(0, ROWS, layout=row_o)
    cols_d = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, o_layout))
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    n_kv = gl.cdiv(kv_len, BLOCK_N)
    ragged = kv_len % BLOCK_N != 0
    token = _token()
    it = 0
    bi = 0
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
    o = gl.zeros([ROWS, HEAD_D], gl.float32, layout=o_layout)
    done_cand = gl.program_id(0) * 0  # the candidate and head whose output O holds (DEFER_STORE)
    done_h = done_cand
    step = gl.num_programs(0)  # PERSISTENT: items pid, pid + grid, ...; else the grid is one program an item
    for t in range(gl.program_id(0), n_items, step):
        h, c0, u0, u1 = _item(t, num_heads, num_cands, UID)
        mixed = u0 != u1
        # tiles of the other candidate's user before and after mine (only when the users differ)
        if ME == 0:
            before = 0
            after = gl.where(mixed, n_kv, 0)
        else:
            before = gl.where(mixed, n_kv, 0)
            after = 0
        turns = u0 == u1  # PINGPONG: take turns only when both consumers run the same loop
        if not DEFER_STORE:
            m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
            l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
            o = gl.zeros([ROWS, HEAD_D], gl.float32, layout=o_layout)

        mbarrier.wait(q_bar, bi & 1)
        q_op = q_smem.index(ME).load(q_layout)
        # Q was read through the generic proxy; the loader's next TMA copy writes it through the async one.
        fence_async_shared()
        mbarrier.arrive(q_free)
        it = _release_tiles(k_ready, v_ready, k_free, v_free, it, before, STAGES)

        if ME == 1:
            if turns:
                token = _turn_pass(token, 0, PINGPONG)  # consumer 0 issues first
        stage = it % STAGES
        mbarrier.wait(k_ready.index(stage), (it // STAGES) & 1)
        if turns:
            token = _turn_wait(token, ME, PINGPONG)
        s = warpgroup_mma(q_op, k_smem.index(stage).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        if turns:
            token = _turn_pass(token, 1 - ME, PINGPONG)
        if DEFER_STORE:  # masked, not branched: ptxas waits for an in-flight wgmma at a branch
            _store_rows(O, o_desc, o_smem, o, l_i, done_cand, done_h, (done_cand < num_cands) & (bi > 0), num_cands,
                        num_heads, rows, cols_d, row_o, TMA_STORE)  # fmt: skip
            m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
            # the zeroed row sums through the asm wait: its branch keeps the stores above ahead of the wait
            l_i = _wgmma_wait_behind(l_i * 0.0)
        s = warpgroup_mma_wait(0, deps=[s])
        mbarrier.arrive(k_free.index(stage))
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, offs_n, kv_len, qk_scale, ragged & (n_kv == 1))
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        for j in range(1, n_kv):
            cur = it + j
            stage = cur % STAGES
            prev = (cur - 1) % STAGES
            mbarrier.wait(k_ready.index(stage), (cur // STAGES) & 1)
            mbarrier.wait(v_ready.index(prev), ((cur - 1) // STAGES) & 1)
            if turns:
                token = _turn_wait(token, ME, PINGPONG)
            s = warpgroup_mma(q_op, k_smem.index(stage).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            o = o * gl.convert_layout(alpha, row_o)[:, None]  # O is not in flight here
            o = warpgroup_mma(p_op, v_smem.index(prev), o, is_async=True)
            if turns:
                token = _turn_pass(token, 1 - ME, PINGPONG)
            s = warpgroup_mma_wait(1, deps=[s])  # S_j done, P_{j-1} V_{j-1} may still run
            mbarrier.arrive(k_free.index(stage))
            p, alpha, m_i, l_i = _softmax_step(
                s, m_i, l_i, offs_n + j * BLOCK_N, kv_len, qk_scale, ragged & (j == n_kv - 1)
            )
            l_i = _wgmma_wait_behind(l_i)  # the real wait for P V, after the exponentials
            o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
            mbarrier.arrive(v_free.index(prev))
            p_op = gl.convert_layout(p.to(dtype), p_layout)
        last = it + n_kv - 1
        mbarrier.wait(v_ready.index(last % STAGES), (last // STAGES) & 1)
        o = o * gl.convert_layout(alpha, row_o)[:, None]
        if turns:
            token = _turn_wait(token, ME, PINGPONG)
        o = warpgroup_mma(p_op, v_smem.index(last % STAGES), o, is_async=True)
        if ME == 0:
            if turns:
                token = _turn_pass(token, 1, PINGPONG)  # consumer 1's last group; consumer 1 passes no more
        o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
        mbarrier.arrive(v_free.index(last % STAGES))
        it = _release_tiles(k_ready, v_ready, k_free, v_free, it + n_kv, after, STAGES)

        if DEFER_STORE:
            done_cand = c0 + ME
            done_h = h
        else:
            _store_rows(O, o_desc, o_smem, o, l_i, c0 + ME, h, c0 + ME < num_cands, num_cands, num_heads, rows, cols_d,
                        row_o, TMA_STORE)  # fmt: skip
        bi += 1
    if DEFER_STORE:
        if bi > 0:
            _store_rows(O, o_desc, o_smem, o, l_i, done_cand, done_h, done_cand < num_cands, num_cands, num_heads, rows,
                        cols_d, row_o, TMA_STORE)  # fmt: skip
    if TMA_STORE:
        tma.store_wait(0)  # the last copy has read its shared buffer before the program ends


@gluon.jit
def _store_rows(
    O, o_desc, o_smem, o, l_i, cand, h, valid, num_cands, num_heads, rows, cols_d, row_o: gl.constexpr,
    TMA_STORE: gl.constexpr,
):  # fmt: skip
    """O[cand, h] = o / l where valid (the odd last candidate's partner and DEFER_STORE's first call are not).
    TMA_STORE: through this consumer's shared buffer and one TMA copy (an invalid tile goes to rows past
    the end of O, which TMA drops), else stores from registers."""
    o = o * gl.convert_layout(1.0 / l_i, row_o)[:, None]  # one reciprocal a row, not a division an element
    if TMA_STORE:
        tma.store_wait(0)  # the previous copy out of o_smem has read it
        o_smem.store(o.to(o_smem.dtype))
        fence_async_shared()
        row0 = gl.where(valid, (cand * num_heads + h) * ROWS, num_cands * num_heads * ROWS)
        tma.async_copy_shared_to_global(o_desc, [row0, 0], o_smem)
    else:
        ptrs = O + ((cand * num_heads + h) * ROWS + rows)[:, None].to(gl.int64) * o.shape[1] + cols_d[None, :]
        gl.store(ptrs, o.to(O.dtype.element_ty), mask=(rows < ROWS)[:, None] & valid)


@gluon.jit(do_not_specialize=["num_cands", "n_items"])  # one build for any candidate count
def _ikbo_fwd_hopper(
    o_desc,
    q_desc,
    k_desc,
    v_desc,
    O,
    UID,
    num_cands,
    num_heads,
    kv_len,
    qk_scale,
    n_items,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PINGPONG: gl.constexpr,
    DEFER_STORE: gl.constexpr,
    TMA_STORE: gl.constexpr,
):
    """Grid: one program an item (or, PERSISTENT, fewer programs walking items pid, pid + grid, ...)."""
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_D], q_desc.layout)
    if TMA_STORE:
        o_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_D], o_desc.layout)
    else:
        o_smem = q_smem  # not used
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    mbarrier.init(q_free, count=2)  # both consumers
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_free.index(i), count=2)
        mbarrier.init(v_free.index(i), count=2)
    gl.warp_specialize(
        [
            (
                _consumer,
                (o_desc, o_smem.index(0), q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free,
                 O, UID, num_cands, num_heads, kv_len, qk_scale, n_items, 0, BLOCK_N, HEAD_D, STAGES, PERSISTENT,
                 PINGPONG, DEFER_STORE, TMA_STORE),
            ),
            (
                _consumer,
                (o_desc, o_smem.index(1), q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free,
                 O, UID, num_cands, num_heads, kv_len, qk_scale, n_items, 1, BLOCK_N, HEAD_D, STAGES, PERSISTENT,
                 PINGPONG, DEFER_STORE, TMA_STORE),
            ),
            (
                _loader,
                (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free,
                 UID, num_cands, num_heads, kv_len, n_items, BLOCK_N, STAGES, PERSISTENT),
            ),
        ],
        [4, 1],
        [240, 32],
    )  # fmt: skip


def hopper_config(config: dict) -> dict:
    """The Gluon kernel's settings from ikbo_target_attention.py's CONFIG (its HOPPER_* keys)."""
    return {
        "BLOCK_N": config["HOPPER_BLOCK_N"],
        "STAGES": config["HOPPER_STAGES"],
        "PERSISTENT": config["HOPPER_PERSISTENT"],
        "PINGPONG": config["HOPPER_PINGPONG"],
        "DEFER_STORE": config.get("HOPPER_DEFER_STORE", False),
        "TMA_STORE": config.get("HOPPER_TMA_STORE", False),
        "PROGRAMS": config.get("HOPPER_PROGRAMS", 0),  # persistent grid size override (tests)
    }


def descriptors(q, k, v, block_n: int, out=None):
    """TMA descriptors over the [rows, D] views: 64-row Q boxes (one candidate at one head), block_n-row K/V,
    and (out given) 64-row output boxes."""
    head_dim = q.shape[-1]
    gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16

    def desc(t, rows):
        flat = t.view(-1, head_dim)
        layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], gdt)
        return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, head_dim], layout)

    descs = (desc(q, ROWS.value), desc(k, block_n), desc(v, block_n))
    return descs if out is None else descs + (desc(out, ROWS.value),)


def attention(q, k, v, cand_to_user, out, config: dict) -> torch.Tensor:
    """out[c, h] = softmax(q[c, h] k[u, h]^T / sqrt(D)) v[u, h] with u = cand_to_user[c]; usable() must hold.
    config: hopper_config()'s keys."""
    num_cands, heads, _, head_dim = q.shape
    kv_len = k.shape[2]
    block_n = config["BLOCK_N"]
    tile = block_n * head_dim * q.element_size()
    box = ROWS.value * head_dim * q.element_size()
    # K and V stages that fit next to the two Q (and output) boxes in 227 KB of shared memory (2 at least)
    fixed = 1024 + (4 if config.get("TMA_STORE") else 2) * box
    stages = max(2, min(config["STAGES"], (232448 - fixed) // (2 * tile)))
    n_items = triton.cdiv(num_cands, 2) * heads
    programs = n_items
    if config["PERSISTENT"]:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
        programs = min(n_items, config.get("PROGRAMS") or config["PERSISTENT"] * sms)
    q_desc, k_desc, v_desc, o_desc = descriptors(q, k, v, block_n, out)
    _ikbo_fwd_hopper[(programs,)](
        o_desc, q_desc, k_desc, v_desc, out, cand_to_user, num_cands, heads, kv_len, 1.4426950408889634 / head_dim**0.5,
        n_items, BLOCK_N=block_n, HEAD_D=head_dim, STAGES=stages, PERSISTENT=bool(config["PERSISTENT"]),
        PINGPONG=bool(config["PINGPONG"]), DEFER_STORE=bool(config.get("DEFER_STORE")),
        TMA_STORE=bool(config.get("TMA_STORE")), num_warps=4,
    )  # fmt: skip
    return out
