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
LOOPS = 1  # one loop of n calls each side: the candidate's and the baseline's, n the same


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
    """DIGESTS random projections of the concatenated tensors (normal weights drawn from seed, float64
    accumulation a chunk at a time): what a process hands over instead of the tensors themselves."""
    out = [0.0] * DIGESTS
    for k, a in enumerate(tensors):
        flat = a.detach().reshape(-1)
        for j in range(DIGESTS):
            g = torch.Generator(device=a.device).manual_seed(_mix(seed, 1_000_003 + j, k))
            for start in range(0, flat.numel(), CHUNK):
                part = flat[start : start + CHUNK]
                u = torch.randn(part.numel(), generator=g, device=a.device, dtype=torch.float32)
                out[j] += float(torch.dot(part.to(torch.float64), u.to(torch.float64)))
    return out


CHUNK = 1 << 24


def norm(acc: list) -> float:
    return float(sum(float(torch.linalg.vector_norm(a.to(torch.float64))) ** 2 for a in acc) ** 0.5)


def mismatch(got, want: list[float], ref_norm: float, norm_bound: float, squared: bool = True) -> str | None:
    """None when the candidate's digests match the reference's within what its tolerance allows. Each
    digest's error is ~N(0, ||error||^2) whatever the error (the weights are independent of it); a right
    output's error is within norm_bound * ||ref|| (twice that for a sum of squares); the margin is 8 of those."""
    if not isinstance(got, list) or len(got) != len(want) or not all(isinstance(v, (int, float)) for v in got):
        return "its digests are missing or malformed"
    if not all(math.isfinite(float(g)) for g in got) and all(math.isfinite(w) for w in want):
        return "its outputs hold NaN or Inf where the reference is finite (unwritten elements read back as NaN)"
    width = 8 * (2 if squared else 1) * norm_bound * ref_norm + 1e-12
    worst = max(abs(float(g) - w) for g, w in zip(got, want))
    if not worst <= width:  # NaN fails too
        return f"a digest of its outputs is off by {worst:.4g} (allowed {width:.4g})"
    return None


def sums_of_squares(outs: list, dtype=torch.float32) -> torch.Tensor:
    """||out||^2 of each output, on the device (no synchronisation: the loop runs on)."""
    return torch.stack([torch.linalg.vector_norm(o.detach(), dtype=dtype).square() for o in outs])


def run_loop(fn, pool: list, buffers: list, seed: int, calls: int, sync, flatten, flush=None) -> list[list[float]]:
    """The loop itself: `calls` calls on fresh inputs, alternating the buffer sets, the L2 flushed before
    each call as in the timed loop; per call, the sum of squares of each output (one read of it)."""
    sums = []
    with torch.no_grad():
        for i in range(calls):
            bufs = call_inputs(pool[i % len(pool)], buffers[i % len(buffers)], seed, i)
            if flush is not None:
                flush()
            sums.append(sums_of_squares(flatten(fn(*bufs))))
        sync()
    return [[float(v) for v in s.tolist()] for s in sums]


def sums_mismatch(got, want: list[list[float]], norm_bound: float) -> str | None:
    """None when every call's sums of squares match the reference's within the tolerance (a right output's
    ||out||^2 is within (2 nb + nb^2) of ||ref||^2; the margin is twice that); else which call is off."""
    if not isinstance(got, list) or len(got) != len(want):
        return f"it reported {len(got) if isinstance(got, list) else 'no'} calls' results for {len(want)} calls"
    width = 2 * (2 * norm_bound + norm_bound**2)
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, list) or len(g) != len(w) or not all(isinstance(v, (int, float)) for v in g):
            return f"call {i + 1}'s result is missing or malformed"
        for a, b in zip(g, w):
            if not abs(float(a) - b) <= width * abs(b) + 1e-30:  # NaN fails too
                return (
                    f"call {i + 1} of {len(want)}: ||out||^2 = {float(a):.6g}, expected {b:.6g} (a call not computed)"
                )
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
