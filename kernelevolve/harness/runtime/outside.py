"""The outside-timed loops: a latency bound that a candidate's own process cannot forge.

Whatever a candidate replaces inside its process (timers, events, statistics, synchronisation), the
evaluator measures from outside how long its process takes to finish `calls` calls, and the judge
verifies that every one of those calls was computed:

- the evaluator releases a loop (`release` file with a fresh seed and a call count) and stops its own
  clock when the loop's `done` file appears; it reads that file at once (nothing written later counts);
- call i runs on the value sets with PERTURBED elements of every floating input scaled by factors drawn
  from (seed, i): inputs no one knew before the release, different on every call, so no output can be
  computed ahead of time, cached, or shared between calls;
- per call the process keeps ||out||^2 of each output (one read of it, no synchronisation) and hands
  over those numbers at the end: handing over costs nothing measurable;
- the judge (judge.py, mode "timed") recomputes every call with the reference and checks the numbers;
  a loop that skipped, cached or faked any call fails them.

The baseline's process runs the same loop with the same number of calls on the same shapes (making the
inputs, flushing the L2 and accumulating cost the same on both sides), so the candidate's latency is
at least baseline latency + (W(candidate) - W(baseline)) / n (evaluator.py applies it, with a margin).
"""

from __future__ import annotations

import json
import math
import os
import time

import torch

DIGESTS = 8
SCALE = 0.01  # relative size of the per-call perturbation of the inputs
LOOPS = 2  # loops of n calls each side, the candidate's and the baseline's (n the same); the fastest counts
# GPU cycles of padding before every call (torch.cuda._sleep, ~0.5 ms), the same on both sides: the loop
# stays bound by the GPU however slowly a process launches its kernels (a launch costs tens of microseconds
# under a sandboxed runtime), so the difference of the two loops' walls is the difference of their kernels.
PAD_CYCLES = 1_000_000


PERTURBED = 1024  # elements of each floating input scaled anew on every call


def call_inputs(pool: list, buffers: list, seed: int, i: int) -> list:
    """The inputs of outside call i, written into `buffers`: the pool's values (a copy, as the timed loop
    refreshes its buffers), then PERTURBED elements of each floating input, chosen from (seed, i), scaled
    by factors in [1, 1.25] (signs and zeros kept: inputs stay in the operator's domain). Every call's
    inputs differ and no one knew them before the release; the judge makes the same."""
    for k, (src, dst) in enumerate(zip(pool, buffers)):
        if not isinstance(dst, torch.Tensor):
            continue
        dst.copy_(src)
        if src.is_floating_point() and src.numel():
            g = torch.Generator(device=src.device).manual_seed(_mix(seed, i, k))
            flat = dst.view(-1)
            idx = torch.randint(flat.numel(), (min(PERTURBED, flat.numel()),), generator=g, device=src.device)
            factor = torch.rand(idx.numel(), generator=g, device=src.device, dtype=torch.float32).mul_(0.25).add_(1.0)
            flat[idx] = (flat[idx].to(torch.float32) * factor).to(flat.dtype)
    return buffers


def digests(tensors: list, seed: int) -> list[float]:
    """DIGESTS random projections of the concatenated tensors: what a process hands over instead of the
    tensors themselves. Each projection is a Gaussian sketch with Kronecker structure: the tensor laid out
    as rows of COLS elements (and a tail), digest j = a_j^T X b_j + t_j . tail with a_j, b_j, t_j normal
    weights drawn from (seed, j, k). E[digest error^2] = ||error||^2 as for dense Gaussian weights, but all
    DIGESTS come from one float64 pass over the tensor (X @ B), not one pass and one weight vector each."""
    out = torch.zeros(DIGESTS, dtype=torch.float64)
    for k, a in enumerate(tensors):
        flat = torch.Tensor.detach(a).reshape(-1)  # the class's method, not one set on the instance
        rows, tail = divmod(flat.numel(), COLS)
        device = flat.device
        g = torch.Generator(device=device).manual_seed(_mix(seed, 1_000_003, k))
        cols_w = torch.randn(COLS, DIGESTS, generator=g, device=device, dtype=torch.float64)
        rows_w = torch.randn(rows, DIGESTS, generator=g, device=device, dtype=torch.float64)
        tail_w = torch.randn(tail, DIGESTS, generator=g, device=device, dtype=torch.float64)
        acc = torch.zeros(DIGESTS, dtype=torch.float64, device=device)
        block = max(1, CHUNK // COLS)
        body = flat[: rows * COLS].view(rows, COLS) if rows else None
        for r in range(0, rows, block):
            x = body[r : r + block].to(torch.float64)
            acc += ((x @ cols_w) * rows_w[r : r + block]).sum(0)
        if tail:
            acc += flat[rows * COLS :].to(torch.float64) @ tail_w
        out += acc.cpu()
    return [float(v) for v in out]


CHUNK = 1 << 22  # elements converted to float64 at a time
COLS = 1024
MARGIN = 12


def norm(acc: list) -> float:
    return float(sum(float(torch.linalg.vector_norm(a.to(torch.float64))) ** 2 for a in acc) ** 0.5)


def mismatch(got, want: list[float], ref_norm: float, norm_bound: float, squared: bool = True) -> str | None:
    """None when the candidate's digests match the reference's within what its tolerance allows. Each
    digest's error has mean square ||error||^2 whatever the error (the weights are independent of it); a
    right output's error is within norm_bound * ||ref|| (twice that for a sum of squares). The margin is
    MARGIN of those: the sketch's error is a product of two normals at worst (an error of rank one), over
    12 times its scale with probability under 2e-6."""
    if not isinstance(got, list) or len(got) != len(want) or not all(isinstance(v, (int, float)) for v in got):
        return "its digests are missing or malformed"
    if not all(math.isfinite(float(g)) for g in got) and all(math.isfinite(w) for w in want):
        return "its outputs hold NaN or Inf where the reference is finite (unwritten elements read back as NaN)"
    width = MARGIN * (2 if squared else 1) * norm_bound * ref_norm + 1e-12
    worst = max(abs(float(g) - w) for g, w in zip(got, want))
    if not worst <= width:  # NaN fails too
        return f"a digest of its outputs is off by {worst:.4g} (allowed {width:.4g})"
    return None


def sums_of_squares(outs: list, dtype=torch.float32) -> torch.Tensor:
    """||out||^2 of each output, on the device (no synchronisation: the loop runs on)."""
    return torch.stack([torch.linalg.vector_norm(torch.Tensor.detach(o), dtype=dtype).square() for o in outs])


def run_loop(fn, pool: list, buffers: list, seed: int, calls: int, sync, flatten, flush=None) -> list[list[float]]:
    """The loop itself: `calls` calls on fresh inputs, alternating the buffer sets, the L2 flushed before
    each call as in the timed loop; per call, the sum of squares of each output (one read of it)."""
    sums = []
    pad = torch.cuda._sleep if any(isinstance(x, torch.Tensor) and x.is_cuda for x in pool[0]) else None
    with torch.no_grad():
        for i in range(calls):
            if pad is not None:
                pad(PAD_CYCLES)
            bufs = call_inputs(pool[i % len(pool)], buffers[i % len(buffers)], seed, i)
            if flush is not None:
                flush()
            sums.append(sums_of_squares(flatten(fn(*bufs))))
        sync()
    return [[float(v) for v in s.tolist()] for s in sums]


def sums_mismatch(got, want: list[list[float]], norm_bound: float, calls: list[int] | None = None) -> str | None:
    """None when every call's sums of squares match the reference's within the tolerance (a right output's
    ||out||^2 is within (2 nb + nb^2) of ||ref||^2; the margin is twice that); else which call is off."""
    if not isinstance(got, list) or len(got) != len(want):
        return f"it reported {len(got) if isinstance(got, list) else 'no'} calls' results for {len(want)} calls"
    width = 2 * (2 * norm_bound + norm_bound**2)
    for k, (g, w) in enumerate(zip(got, want)):
        i = calls[k] if calls is not None else k  # `got` and `want` may be a sample of the loop's calls
        if not isinstance(g, list) or len(g) != len(w) or not all(isinstance(v, (int, float)) for v in g):
            return f"call {i + 1}'s result is missing or malformed"
        for a, b in zip(g, w):
            if not abs(float(a) - b) <= width * abs(b) + 1e-30:  # NaN fails too
                return f"call {i + 1}: ||out||^2 = {float(a):.6g}, expected {b:.6g} (a call not computed)"
    return None


def _mix(seed: int, i: int, k: int) -> int:
    return (seed * 1_000_003 + i * 7919 + k * 104_729) % (2**63 - 1)


# -- the process's side of the handshake (files in its own folder; the evaluator's side: outside_clock.py)
def await_release(
    folder: str, name: str, stop_path: str | None, estimate_ms: float | None = None, timeout_s: float = 600.0
) -> dict:
    """Say `name` is ready (with this process's latency estimate, which only the baseline's process is
    believed for), then wait for the evaluator's release; its payload ({"seed", "calls"})."""
    tmp = os.path.join(folder, f".ready.{name}.tmp")
    with open(tmp, "w") as f:  # whole or absent: the evaluator reads it as soon as it exists
        f.write(json.dumps({"estimate_ms": estimate_ms}))
    os.replace(tmp, os.path.join(folder, f"ready.{name}"))
    path = os.path.join(folder, f"release.{name}")
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if stop_path and os.path.exists(stop_path):
            raise SystemExit(0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the evaluator never released the outside-timed loop {name}")
        time.sleep(0.0002)
    with open(path) as f:
        return json.loads(f.read())


def report_done(folder: str, name: str, values: list) -> None:
    tmp = os.path.join(folder, f".done.{name}.tmp")
    with open(tmp, "w") as f:
        json.dump({"sums": values}, f)
    os.replace(tmp, os.path.join(folder, f"done.{name}"))
