"""The warp-specialised, persistent flash-attention forward for Hopper in Gluon (FlashAttention-3's layout): a
loader warp issuing every TMA copy and two consumer warpgroups of 64 rows that take turns issuing their wgmma
(ping-pong), one program a block or one program an SM looping over blocks, or over all of its key tiles in one
flat loop (the next block's first Q K^T issued with the previous block's last P V). Launched by
_flash_hopper.attention (HOPPER_WS); the softmax pieces are _flash_hopper_softmax.py's."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from _flash_hopper_softmax import rescale_if_any as _rescale_if_any
from _flash_hopper_softmax import scores_to_p as _scores_to_p
from _flash_hopper_softmax import store_normalised as _store_normalised
from _hopper_gluon import tma_load as _tma_load
from _hopper_gluon import turn_pass as _turn_pass
from _hopper_gluon import turn_wait as _turn_wait
from _hopper_gluon import wgmma_wait_behind as _wait_after


@gluon.constexpr_function
def _warpgroup_acc_layout(width):
    """A consumer warpgroup's wgmma accumulator layout for [64, width] tiles (S: the key tile's width, O: the
    head dim)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, width, 16])


@gluon.jit
def _ws_unit(u, n_m, CAUSAL: gl.constexpr):
    """Work unit u of the persistent schedule: (head, k, blocks in it). Full attention: one 128-row block
    (k = its index). Causal: two blocks of one head, k-th from the end and k-th from the start (n_m + 1
    key tiles together, whatever k: units of equal cost, so that a static round-robin over them balances
    the SMs); the middle block of an odd n_m alone."""
    if CAUSAL:
        n_p = (n_m + 1) // 2
        k = u % n_p
        return u // n_p, k, 1 + (2 * k + 1 < n_m).to(gl.int32)
    else:
        return u // n_m, u % n_m, gl.to_tensor(1)


@gluon.jit
def _ws_block(pid_bh, pid_m, seq_len, kv_group, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr):
    """Block pid_m (128 rows) of head pid_bh: (first row, key tiles, unmasked key tiles, first KV row)."""
    m0 = pid_m * 128
    if CAUSAL:
        n_tiles = gl.cdiv(gl.minimum(m0 + 128, seq_len), BLOCK_N)
        n_full = m0 // BLOCK_N
    else:
        n_tiles = gl.cdiv(seq_len, BLOCK_N)
        n_full = seq_len // BLOCK_N
    return m0, n_tiles, n_full, (pid_bh // kv_group) * seq_len


@gluon.jit
def _grid_block(n_m, CAUSAL: gl.constexpr):
    """One program a block: (head, block) of this program. A head's query blocks side by side, so that
    the programs running at once share its K/V in L2; causal: heaviest first within a head."""
    pid_bh = gl.program_id(0) // n_m
    pid_m = gl.program_id(0) % n_m
    if CAUSAL:
        pid_m = n_m - 1 - pid_m
    return pid_bh, pid_m


@gluon.jit
def _ws_loader(
    q_desc,
    k_desc,
    v_desc,
    q_smem,
    kv_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    seq_len,
    kv_group,
    n_m,
    n_units,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
):
    """The loader warp: for each of the program's blocks, Q (once both consumers hold the previous
    block's Q in registers), then K_t and V_t into ring stage it % STAGES (it counts tiles over all
    of the program's blocks) as soon as both consumer warpgroups have released what the stage held."""
    if PERSISTENT:
        it = 0
        bi = 0
        for u in range(gl.program_id(0), n_units, gl.num_programs(0)):
            pid_bh, k, count = _ws_unit(u, n_m, CAUSAL)
            for i in range(count):
                pid_m = k
                if CAUSAL:
                    pid_m = gl.where(i == 0, n_m - 1 - k, k)
                it = _ws_load_block(
                    q_desc, k_desc, v_desc, q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free,
                    seq_len, kv_group, pid_bh, pid_m, it, bi, CAUSAL, BLOCK_N, STAGES,
                )  # fmt: skip
                bi += 1
    else:  # one block: straight-line code, the counters constants
        pid_bh, pid_m = _grid_block(n_m, CAUSAL)
        _ws_load_block(
            q_desc, k_desc, v_desc, q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free,
            seq_len, kv_group, pid_bh, pid_m, gl.program_id(0) * 0, 0, CAUSAL, BLOCK_N, STAGES,
        )  # fmt: skip


@gluon.jit
def _ws_load_block(
    q_desc,
    k_desc,
    v_desc,
    q_smem,
    kv_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    seq_len,
    kv_group,
    pid_bh,
    pid_m,
    it,
    bi,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
):
    """The loader's work for block (pid_bh, pid_m), the program's bi-th, whose first tile is the it-th:
    returns the tile counter after it."""
    m0, n_tiles, n_full, kv_row0 = _ws_block(pid_bh, pid_m, seq_len, kv_group, CAUSAL, BLOCK_N)
    qb = bi % q_smem.shape[0]  # Q buffer: one, or two (PERSISTENT == 2) used in turn
    q_phase = bi // q_smem.shape[0]
    mbarrier.wait(q_free.index(qb), (q_phase & 1) ^ 1, pred=q_phase > 0)
    mbarrier.expect(q_bar.index(qb), q_desc.block_type.nbytes)
    _tma_load(q_desc, [pid_bh * seq_len + m0, 0], q_bar.index(qb), q_smem.index(qb))
    for t in range(n_tiles):
        stage = it % STAGES
        reuse = it >= STAGES
        phase = ((it // STAGES) & 1) ^ 1  # the release of the tile STAGES before
        mbarrier.wait(k_free.index(stage), phase, pred=reuse)
        mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
        row = kv_row0 + t * BLOCK_N
        _tma_load(k_desc, [row, 0], k_ready.index(stage), kv_smem.index(stage))
        mbarrier.wait(v_free.index(stage), phase, pred=reuse)
        mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
        _tma_load(v_desc, [row, 0], v_ready.index(stage), kv_smem.index(STAGES + stage))
        it += 1
    return it


@gluon.jit
def _ws_consumer(
    q_smem,
    kv_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    O,
    seq_len,
    kv_group,
    qk_scale,
    n_m,
    n_units,
    ME: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PINGPONG: gl.constexpr,
    LAZY: gl.constexpr,
):
    """Consumer warpgroup ME: rows 64 * ME ... + 64 of each of the program's 128-row blocks (its slice of
    the Q tile), the same pipelined loop as _flash_fwd_hopper, releasing K/V stages to the loader
    instead of refilling them. PINGPONG: the two consumers take turns issuing their wgmma (FlashAttention-3's
    ping-pong: one's softmax runs while the other's products are on the tensor cores); both run the same
    number of turns (their blocks are the same), consumer 0 first."""
    if PERSISTENT == 2:
        _ws_consumer_flat(
            q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free, O, seq_len, kv_group,
            qk_scale, n_m, n_units, ME, CAUSAL, BLOCK_N, HEAD_D, STAGES, PINGPONG, LAZY,
        )  # fmt: skip
    else:
        token = gl.program_id(0) * 0
        if ME == 1:
            token = _turn_pass(token, 0, PINGPONG)  # consumer 0 issues first
        if PERSISTENT:
            it = 0
            bi = 0
            for u in range(gl.program_id(0), n_units, gl.num_programs(0)):
                pid_bh, k, count = _ws_unit(u, n_m, CAUSAL)
                for i in range(count):
                    pid_m = k
                    if CAUSAL:
                        pid_m = gl.where(i == 0, n_m - 1 - k, k)
                    it, token = _ws_consume_block(
                        q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free, O, seq_len, kv_group,
                        qk_scale, pid_bh, pid_m, it, bi, token, ME, CAUSAL, BLOCK_N, HEAD_D, STAGES, PERSISTENT, PINGPONG, LAZY,
                    )  # fmt: skip
                    bi += 1
        else:  # one block: straight-line code, the counters constants
            pid_bh, pid_m = _grid_block(n_m, CAUSAL)
            it, token = _ws_consume_block(
                q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free, O, seq_len, kv_group,
                qk_scale, pid_bh, pid_m, 0, 0, token, ME, CAUSAL, BLOCK_N, HEAD_D, STAGES, PERSISTENT, PINGPONG, LAZY,
            )  # fmt: skip
        if ME == 0:
            token = _turn_wait(token, 0, PINGPONG)  # consumer 1's last pass: no barrier left half-arrived


@gluon.jit
def _ws_consume_block(
    q_smem,
    kv_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    O,
    seq_len,
    kv_group,
    qk_scale,
    pid_bh,
    pid_m,
    it,
    bi,
    token,
    ME: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PINGPONG: gl.constexpr,
    LAZY: gl.constexpr,
):
    """Consumer ME's work for block (pid_bh, pid_m) (the program's bi-th, first tile the it-th): returns
    the tile counter after it and the ping-pong token."""
    ROWS: gl.constexpr = 64
    OTHER: gl.constexpr = 1 - ME
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = _warpgroup_acc_layout(BLOCK_N)
    o_layout: gl.constexpr = _warpgroup_acc_layout(HEAD_D)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    m0, n_tiles, n_full, kv_row0 = _ws_block(pid_bh, pid_m, seq_len, kv_group, CAUSAL, BLOCK_N)
    m0 = m0 + ME * ROWS
    offs_m = m0 + gl.arange(0, ROWS, layout=row_s)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    o = gl.zeros([ROWS, HEAD_D], gl.float32, layout=o_layout)

    mbarrier.wait(q_bar.index(0), bi & 1)
    q_op = q_smem.index(0).slice(ME * ROWS, ROWS).load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    if PERSISTENT:
        # The Q tile was read through the generic proxy and the next TMA copy writes it through the
        # async proxy: fence before telling the loader it may bring the next block's Q.
        fence_async_shared()
        mbarrier.arrive(q_free.index(0))
    mbarrier.wait(k_ready.index(it % STAGES), (it // STAGES) & 1)
    token = _turn_wait(token, ME, PINGPONG)
    s = warpgroup_mma(q_op, kv_smem.index(it % STAGES).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    token = _turn_pass(token, OTHER, PINGPONG)
    s = warpgroup_mma_wait(0, deps=[s])
    mbarrier.arrive(k_free.index(it % STAGES))
    p, alpha, m_i, l_i = _scores_to_p(s, m_i, l_i, offs_m, offs_n, seq_len, qk_scale, n_full <= 0, CAUSAL, LAZY)
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    for j in range(1, n_tiles):
        cur = it + j
        stage = cur % STAGES
        prev = (cur - 1) % STAGES
        if LAZY:  # before S_j's issue: a branch with a wgmma in flight would make ptxas wait for it
            o = _rescale_if_any(o, gl.convert_layout(alpha, row_o))
        mbarrier.wait(k_ready.index(stage), (cur // STAGES) & 1)
        token = _turn_wait(token, ME, PINGPONG)
        s = warpgroup_mma(q_op, kv_smem.index(stage).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        if not LAZY:
            o = o * gl.convert_layout(alpha, row_o)[:, None]
        mbarrier.wait(v_ready.index(prev), ((cur - 1) // STAGES) & 1)
        o = warpgroup_mma(p_op, kv_smem.index(STAGES + prev), o, is_async=True)
        token = _turn_pass(token, OTHER, PINGPONG)
        s = warpgroup_mma_wait(1, deps=[s])
        mbarrier.arrive(k_free.index(stage))
        p, alpha, m_i, l_i = _scores_to_p(
            s, m_i, l_i, offs_m, offs_n + j * BLOCK_N, seq_len, qk_scale, j >= n_full, CAUSAL, LAZY
        )
        l_i = _wait_after(l_i)
        o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
        mbarrier.arrive(v_free.index(prev))
        p_op = gl.convert_layout(p.to(dtype), p_layout)
    last = it + n_tiles - 1
    o = o * gl.convert_layout(alpha, row_o)[:, None]
    mbarrier.wait(v_ready.index(last % STAGES), (last // STAGES) & 1)
    o = warpgroup_mma(p_op, kv_smem.index(STAGES + last % STAGES), o, is_async=True)
    o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
    mbarrier.arrive(v_free.index(last % STAGES))
    _store_normalised(O, o, l_i, pid_bh * seq_len + m0, m0, seq_len)
    return it + n_tiles, token


@gluon.jit
def _ws_consumer_flat(
    q_smem,
    kv_smem,
    q_bar,
    q_free,
    k_ready,
    v_ready,
    k_free,
    v_free,
    O,
    seq_len,
    kv_group,
    qk_scale,
    n_m,
    n_units,
    ME: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    PINGPONG: gl.constexpr,
    LAZY: gl.constexpr,
):
    """Persistent consumer ME (PERSISTENT == 2) as one loop over all the key tiles of all its blocks,
    the pipeline running across block boundaries: step g issues S_g = Q K_g^T and the P V product of
    tile g - 1 even when that tile ended the previous block, so a block's first softmax overlaps the
    previous block's last P V, and that block's epilogue (normalise, store) comes right after, with no
    gap in this warpgroup's stream of wgmma. Q is wgmma's shared-memory operand (two Q buffers, used in
    turn: a block's Q is released at the next block's first step), so only O, P and S are in registers. For the
    program's first step the "previous" P V is a zero P times the current K tile (finite: a V buffer
    may hold anything), and its store is masked off. kv_smem: K stages 0 ... STAGES - 1, then V."""
    ROWS: gl.constexpr = 64
    OTHER: gl.constexpr = 1 - ME
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = _warpgroup_acc_layout(BLOCK_N)
    o_layout: gl.constexpr = _warpgroup_acc_layout(HEAD_D)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    rows_s = gl.arange(0, ROWS, layout=row_s)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    pid = gl.program_id(0)
    step = gl.num_programs(0)

    total = pid * 0  # this program's key tiles, all blocks
    for u in range(pid, n_units, step):
        pid_bh, k, count = _ws_unit(u, n_m, CAUSAL)
        for i in range(count):
            pid_m = k
            if CAUSAL:
                pid_m = gl.where(i == 0, n_m - 1 - k, k)
            total += _ws_block(pid_bh, pid_m, seq_len, kv_group, CAUSAL, BLOCK_N)[1]

    token = pid * 0
    if ME == 1:
        token = _turn_pass(token, 0, PINGPONG)  # consumer 0 issues first
    # The current block: unit u, its i-th block (pid_bh, rows m0 ...), key tile j of n_tiles, the program's bi-th.
    u = pid
    i = pid * 0
    pid_bh, k, count = _ws_unit(u, n_m, CAUSAL)
    pid_m = k
    if CAUSAL:
        pid_m = n_m - 1 - k
    m0, n_tiles, n_full, kv_row0 = _ws_block(pid_bh, pid_m, seq_len, kv_group, CAUSAL, BLOCK_N)
    m0 = m0 + ME * ROWS
    j = pid * 0
    bi = pid * 0
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
    # The previous tile's P and the accumulator it adds to (a zero P before the first tile), the previous
    # block's row sums and rows.
    o = gl.zeros([ROWS, HEAD_D], gl.float32, layout=o_layout)
    p_op = gl.convert_layout(s_zero.to(dtype), p_layout)
    alpha = gl.full([ROWS], 1.0, gl.float32, layout=row_s)
    l_prev = gl.full([ROWS], 1.0, gl.float32, layout=row_s)
    # Whether the previous tile was the first of its block: its P V then starts the accumulator (use_acc off),
    # so O is neither zeroed nor rescaled between blocks.
    prev_first = pid == pid
    prev_row0 = pid * 0
    prev_m0 = seq_len  # no rows: nothing stored before the first block
    for g in range(total):
        stage = g % STAGES
        prev = (g + STAGES - 1) % STAGES
        qb = bi % 2
        # O rescaled before S_g is issued: ptxas serialises the wgmma pipeline when registers of a later
        # wgmma's accumulator are written between an issued wgmma and its wait. LAZY: skipped by a warp whose
        # rows kept their max (nothing is in flight here, so the branch costs the wgmma pipeline nothing).
        if LAZY:
            o = _rescale_if_any(o, gl.convert_layout(alpha, row_o))
        else:
            o = o * gl.convert_layout(alpha, row_o)[:, None]
        # No predicated waits in this loop: ptxas waits for every wgmma in flight before a branch that it
        # cannot prove uniform (the predicated wait's skip), which would serialise S_g and P V. The Q
        # buffer stays complete until this consumer releases it at the block's last tile; the first step
        # waits for V_0 (always loaded) in place of a previous tile's V.
        mbarrier.wait(q_bar.index(qb), (bi // 2) & 1)
        q_op = q_smem.index(qb).slice(ME * ROWS, ROWS)
        mbarrier.wait(k_ready.index(stage), (g // STAGES) & 1)
        token = _turn_wait(token, ME, PINGPONG)
        s = warpgroup_mma(q_op, kv_smem.index(stage).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(gl.where(g > 0, prev, 0)), gl.where(g > 0, (g - 1) // STAGES, 0) & 1)
        o = warpgroup_mma(
            p_op, kv_smem.index(gl.where(g > 0, STAGES + prev, stage)), o, use_acc=not prev_first, is_async=True
        )
        token = _turn_pass(token, OTHER, PINGPONG)
        s = warpgroup_mma_wait(1, deps=[s])
        mbarrier.arrive(k_free.index(stage))
        p, alpha, m_i, l_i = _scores_to_p(
            s, m_i, l_i, m0 + rows_s, offs_n + j * BLOCK_N, seq_len, qk_scale, j >= n_full, CAUSAL, LAZY
        )
        l_i = _wait_after(l_i)
        o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
        mbarrier.arrive(v_free.index(prev), pred=g > 0)
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        alpha = gl.where(j == 0, 1.0, alpha)  # a block's first P V starts O afresh: nothing to rescale
        prev_first = j == 0
        if j == 0:  # o is the previous block's finished output (none before the first block)
            # The previous block's Q buffer is free (its last Q K^T is long done): the loader may bring the
            # next block's Q into it. Released here rather than after that Q K^T's wait: an arrive there,
            # even predicated off, costs a warpgroup barrier every step.
            mbarrier.arrive(q_free.index(1 - qb), pred=bi > 0)
            _store_normalised(O, o, l_prev, prev_row0, prev_m0, seq_len)
        j += 1
        if j == n_tiles:  # on to the next block
            l_prev = l_i
            prev_row0 = pid_bh * seq_len + m0
            prev_m0 = m0
            m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
            l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
            j = pid * 0
            bi += 1
            i += 1
            if i == count:
                u += step
                i = pid * 0
                pid_bh, k, count = _ws_unit(u, n_m, CAUSAL)
            pid_m = k
            if CAUSAL:
                pid_m = gl.where(i == 0, n_m - 1 - k, k)
            m0, n_tiles, n_full, kv_row0 = _ws_block(pid_bh, pid_m, seq_len, kv_group, CAUSAL, BLOCK_N)
            m0 = m0 + ME * ROWS
    # The last block's last P V and epilogue.
    last = (total + STAGES - 1) % STAGES
    o = o * gl.convert_layout(alpha, row_o)[:, None]
    mbarrier.wait(v_ready.index(last), ((total - 1) // STAGES) & 1)
    o = warpgroup_mma(p_op, kv_smem.index(STAGES + last), o, use_acc=not prev_first, is_async=True)
    o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
    mbarrier.arrive(v_free.index(last))
    _store_normalised(O, o, l_prev, prev_row0, prev_m0, seq_len)
    if ME == 0:
        token = _turn_wait(token, 0, PINGPONG)  # consumer 1's last pass: no barrier left half-arrived


@gluon.jit
def _flash_fwd_hopper_ws(
    q_desc,
    k_desc,
    v_desc,
    O,
    seq_len,
    kv_group,
    qk_scale,
    n_m,
    n_units,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    PERSISTENT: gl.constexpr,
    PINGPONG: gl.constexpr,
    LAZY: gl.constexpr = False,
):
    """Warp-specialised variant (FlashAttention-3's layout): 128-row query blocks, one loader warp issuing
    every TMA copy, and two consumer warpgroups (64 rows each, Q as the register operand, 240 registers a
    thread by setmaxnreg) that only meet at the K/V stages they both read, and with PINGPONG take turns
    issuing wgmma. Not persistent: one program a block (grid n_m * heads). PERSISTENT: a grid of at most
    one program an SM, each taking the work units (_ws_unit) pid, pid + grid, ...; the loader runs ahead
    into the next block while the consumers finish the current one. LAZY: FlashAttention-4's lazy rescale
    (_scores_to_p keeps a row's max until it grows by more than 8; _rescale_if_any skips O's multiplies per
    warp), in the per-block and the flat persistent loops."""
    ROWS: gl.constexpr = 64
    dtype: gl.constexpr = q_desc.dtype
    QB: gl.constexpr = 2 if PERSISTENT == 2 else 1  # Q buffers (cross-block pipeline: double-buffered)
    q_smem = gl.allocate_shared_memory(dtype, [QB, 2 * ROWS, HEAD_D], q_desc.layout)
    # K stages 0 ... STAGES - 1 and V stages after them in one buffer (the cross-block consumer picks its
    # first P V operand by a runtime index: a K tile for the program's first block, where P is zero).
    kv_smem = gl.allocate_shared_memory(dtype, [2 * STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [QB, 1], mbarrier.MBarrierLayout())
    q_free = gl.allocate_shared_memory(gl.int64, [QB, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(QB):
        mbarrier.init(q_bar.index(i), count=1)
        mbarrier.init(q_free.index(i), count=2)  # both consumer warpgroups
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_free.index(i), count=2)
        mbarrier.init(v_free.index(i), count=2)
    gl.warp_specialize(
        [
            (
                _ws_consumer,
                (q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free, O,
                 seq_len, kv_group, qk_scale, n_m, n_units, 0, CAUSAL, BLOCK_N, HEAD_D, STAGES, PERSISTENT,
                 PINGPONG, LAZY),
            ),
            (
                _ws_consumer,
                (q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free, O,
                 seq_len, kv_group, qk_scale, n_m, n_units, 1, CAUSAL, BLOCK_N, HEAD_D, STAGES, PERSISTENT,
                 PINGPONG, LAZY),
            ),
            (
                _ws_loader,
                (q_desc, k_desc, v_desc, q_smem, kv_smem, q_bar, q_free, k_ready, v_ready, k_free, v_free,
                 seq_len, kv_group, n_m, n_units, CAUSAL, BLOCK_N, STAGES, PERSISTENT),
            ),
        ],
        [4, 1],
        [240, 32],
    )  # fmt: skip
