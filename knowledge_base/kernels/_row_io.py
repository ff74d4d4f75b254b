"""Device-side helpers shared by the row kernels (softmax, RMSNorm, cross-entropy): loads and
stores with an optional L2 eviction hint, and the online max / sum-of-exp of a softmax.

Rows are addressed through their own stride (a row of a wider tensor, x[:, :N], is read in place);
the elements of a row are adjacent. Imported as `from _row_io import ...` (knowledge_base/kernels is on the candidates' import path;
Triton resolves @triton.jit helpers through the importing kernel's module). Values are in log2
units: x * log2(e), so exp becomes exp2.
"""

import triton
import triton.language as tl


@triton.jit
def row_ptr(ptr, row, stride):
    # Where `row` starts in a tensor whose rows are `stride` elements apart (int64: no overflow past 2^31).
    return ptr + row.to(tl.int64) * stride


@triton.jit
def load_hinted(ptrs, mask, other, L2_HINTS: tl.constexpr, POLICY: tl.constexpr):
    # POLICY "evict_last": the row is read again soon, keep it in L2; "evict_first": last read.
    if L2_HINTS:
        x = tl.load(ptrs, mask=mask, other=other, eviction_policy=POLICY)
    else:
        x = tl.load(ptrs, mask=mask, other=other)
    return x


@triton.jit
def store_streaming(ptrs, value, mask, L2_HINTS: tl.constexpr):
    # The output is not read again by this kernel: first out of L2 when hinted.
    if L2_HINTS:
        tl.store(ptrs, value, mask=mask, eviction_policy="evict_first")
    else:
        tl.store(ptrs, value, mask=mask)


@triton.jit
def online_update(m, s, x):
    # One exp2 per element: exp2(-|x - m|) rescales s when x is a new max, else it is the term;
    # x = -inf adds nothing (and avoids -inf - -inf). Returns the new running max and sum.
    e = tl.where(x == float("-inf"), 0.0, tl.exp2(-tl.abs(x - m)))
    s = tl.where(x > m, s * e + 1.0, s + e)
    return tl.maximum(m, x), s


@triton.jit
def combine(m, s):
    # Running maxima and sums (per lane, or per chunk) -> (max, sum of exp2(. - max)) over axis 0.
    top = tl.max(m, axis=0)
    safe = tl.where(top == float("-inf"), 0.0, top)
    return top, tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp2(m - safe)), axis=0)


@triton.jit
def tile_index(i, n_tiles, REVERSE: tl.constexpr):
    # The i-th tile of a second pass; REVERSE walks back, so it starts on what the first pass left in L2.
    if REVERSE:
        t = n_tiles - 1 - i
    else:
        t = i
    return t


@triton.jit
def arrive_last(arrived_ptr, row, n_chunks):
    # After a program stored its partial: counts it in for the row; True for the row's last program,
    # which then sees every partial (acq_rel; the barrier orders this program's stores before it).
    tl.debug_barrier()
    arrived_before = tl.atomic_add(arrived_ptr + row, 1, sem="acq_rel")
    return arrived_before == n_chunks - 1


@triton.jit
def load_chunk(x_ptr, row, n_rows, stride, c, col_ok, other):
    # Columns c of `row` (nothing past the last row): the cooperative kernels' per-row chunk.
    return tl.load(row_ptr(x_ptr, row, stride) + c, mask=col_ok & (row < n_rows), other=other)


@triton.jit
def current_chunk(x_next, x_ptr, row, n_rows, stride, c, col_ok, other, PREFETCH: tl.constexpr):
    # A cooperative program's chunk of `row`: loaded while it waited on the previous row
    # (PREFETCH, in x_next), or now.
    if PREFETCH:
        x = x_next
    else:
        x = load_chunk(x_ptr, row, n_rows, stride, c, col_ok, other)
    return x


@triton.jit
def wait_slots(slots, k_ok, tries, SPIN_LIMIT: tl.constexpr):
    # Polls a row's slots (atomic reads go to L2, never a stale L1 line) until every one is written
    # (non-zero) or the program has polled SPIN_LIMIT times in all: a bound, never a hang.
    # Returns the slots, whether all were written, and the polls so far.
    v = tl.atomic_add(slots, 0, mask=k_ok, sem="relaxed")
    ready = tl.min(tl.where(k_ok, v != 0, 1).to(tl.int32), axis=0)
    while (ready == 0) & (tries < SPIN_LIMIT):
        v = tl.atomic_add(slots, 0, mask=k_ok, sem="relaxed")
        ready = tl.min(tl.where(k_ok, v != 0, 1).to(tl.int32), axis=0)
        tries += 1
    return v, ready, tries


@triton.jit
def publish_max_sum(part_max_ptr, part_sum_ptr, pid, m, s):
    # A chunk program's running maxima and sums, reduced and stored as its partial.
    chunk_max, chunk_sum = combine(m, s)
    tl.store(part_max_ptr + pid, chunk_max)
    tl.store(part_sum_ptr + pid, chunk_sum)


@triton.jit
def merged_max_sum(part_max_ptr, part_sum_ptr, row, n_chunks, MAX_CHUNKS: tl.constexpr):
    # The row's partials merged (.cg reads L2, never a stale L1 line): its max and sum of exp2.
    k = tl.arange(0, MAX_CHUNKS)
    p_max = tl.load(part_max_ptr + row * n_chunks + k, mask=k < n_chunks, other=float("-inf"), cache_modifier=".cg")
    p_sum = tl.load(part_sum_ptr + row * n_chunks + k, mask=k < n_chunks, other=0.0, cache_modifier=".cg")
    return combine(p_max, p_sum)


@triton.jit
def coop_coords(n_chunks, n_cols, CHUNK: tl.constexpr, MAX_CHUNKS: tl.constexpr):
    # A cooperative program's place: its group of rows, its chunk of columns (and which are in the
    # row), and the row's slot indices (and which exist).
    pid = tl.program_id(0)
    group = pid // n_chunks
    chunk = pid - group * n_chunks
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    k = tl.arange(0, MAX_CHUNKS)
    return group, chunk, c, c < n_cols, k, k < n_chunks


@triton.jit
def chunk_coords(n_chunks, BLOCK_N: tl.constexpr):
    # A chunk program's place: program id, row, which chunk of it, tile lanes.
    pid = tl.program_id(0)
    row = pid // n_chunks
    chunk = pid - row * n_chunks
    return pid, row, chunk, tl.arange(0, BLOCK_N)


@triton.jit
def split_coords(n_cols, BLOCK_N: tl.constexpr):
    # A split program's id, tile lanes and tiles a row. Program p takes rows p, p + n_programs, ...
    # (the trip count comes from the host: the interpreter cannot use a program id as a range() bound).
    return tl.program_id(0), tl.arange(0, BLOCK_N), tl.cdiv(n_cols, BLOCK_N)


@triton.jit
def split_row(pid, r, n_programs, n_rows, n_cols):
    # The r-th row of split program pid and how many of its columns exist: 0 for rows past the end
    # (an all-false mask is cheaper than a branch around two loops).
    row = pid + r * n_programs
    return row, tl.where(row < n_rows, n_cols, 0)
