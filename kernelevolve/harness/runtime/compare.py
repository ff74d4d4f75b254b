"""Checking a candidate's outputs against the reference computed in higher precision."""

from __future__ import annotations

import contextlib
import copy
import functools

import torch

from kernelevolve.harness.runtime.configs import Tolerance
from kernelevolve.harness.runtime.modules import flatten


def poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    elif t.numel():
        t.fill_(torch.iinfo(t.dtype).max)
    return t


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty & co. hand out NaN-filled memory while the candidate runs, so unwritten
    elements of its outputs fail the comparison."""
    names = ["empty", "empty_like", "empty_strided"]
    saved = {n: getattr(torch, n) for n in names}
    saved_new_empty = torch.Tensor.new_empty
    own_new_empty = "new_empty" in vars(torch.Tensor)  # else inherited: restore by deleting ours

    def wrap(fn):
        @functools.wraps(fn)  # named as the allocation it is (the kernel monitor reads the name)
        def allocate(*args, **kwargs):
            return poison(fn(*args, **kwargs))

        return allocate

    for n in names:
        setattr(torch, n, wrap(saved[n]))
    torch.Tensor.new_empty = wrap(saved_new_empty)
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch, n, fn)
        if own_new_empty:
            torch.Tensor.new_empty = saved_new_empty
        else:
            del torch.Tensor.new_empty


def run_model(fn, inputs: list, synchronize=None):
    with torch.no_grad():
        out = fn(*inputs)
    if synchronize is not None:
        synchronize()
    return out


CHUNK = 1 << 24  # elements compared at a time: the comparison's transients stay ~0.5 GB at any output size


def kept_precision(out: torch.Tensor, precise: torch.Tensor) -> torch.Tensor:
    """The precise output as kept for comparisons: float32 where the output is a 16-bit float (rounding a
    float64 result to float32 costs 6e-8 relative, far inside any 16-bit tolerance, and halves what a check
    holds on the GPU), else as computed."""
    if out.is_floating_point() and out.element_size() <= 2 and precise.dtype == torch.float64:
        return precise.to(torch.float32)
    return precise


def precise_dtype(expected: list) -> torch.dtype:
    """What the reference computes in for a check: float32 where every floating output is a 16-bit float
    (kept so anyway, `kept_precision`; float64 there cost flash attention's judges ~1-2 s a shape on the
    H200, beside the candidate's first calls), else float64."""
    floats = [e for e in expected if e.is_floating_point()]
    return torch.float32 if floats and all(e.element_size() <= 2 for e in floats) else torch.float64


@contextlib.contextmanager
def exact_float32():
    """No TF32 while a reference runs in float32 (cuDNN's convolutions use it by default)."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def reference_outputs(model, inputs: list, synchronize=None) -> tuple[list, list]:
    """(the outputs' shapes and dtypes at the case's dtype, as meta tensors; the outputs computed in
    `precise_dtype` — or the other of float64 and float32 where that cannot run — kept as `kept_precision`
    says)."""
    expected = [t.detach().to("meta") for t in flatten(run_model(model, inputs, synchronize))]
    first = precise_dtype(expected)
    for precise in (first, torch.float64 if first == torch.float32 else torch.float32):
        try:
            m = copy.deepcopy(model).to(precise)
            xs = [x.to(precise) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            with exact_float32():
                outs = flatten(run_model(m, xs, synchronize))
            del m, xs
            return expected, [kept_precision(e, t.detach()) for e, t in zip(expected, outs)]
        except (RuntimeError, TypeError, NotImplementedError):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    raise RuntimeError("the reference could not run in float64 or float32")


def compare(outs: list, expected: list, refs: list, tol: Tolerance) -> tuple[bool, str, float | None, float | None]:
    """(ok, message, max_abs_err, max_rel_err) for one call's outputs. `expected` gives each output's
    shape and dtype (meta tensors do), `refs` the precise values; compared CHUNK elements at a time."""
    if len(outs) != len(expected):
        return False, f"forward returned {len(outs)} tensors, reference returns {len(expected)}", None, None
    max_abs, max_rel = 0.0, 0.0
    for i, (out, exp, ref) in enumerate(zip(outs, expected, refs)):
        where = f"output {i}: " if len(outs) > 1 else ""
        if type(out) is not torch.Tensor:
            return False, f"{where}a {type(out).__name__}, expected a plain torch.Tensor", None, None
        if tuple(out.shape) != tuple(exp.shape):
            return False, f"{where}shape {tuple(out.shape)}, expected {tuple(exp.shape)}", None, None
        if out.dtype != exp.dtype:
            return False, f"{where}dtype {out.dtype}, expected {exp.dtype}", None, None
        if out.numel() == 0:
            continue
        failed, abs_err, rel_err = _compare_one(out.detach(), ref.detach(), tol)
        if abs_err is not None:
            max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        if failed:
            return False, where + failed, abs_err, rel_err
    return True, "", max_abs, max_rel


def _compare_one(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[str | None, float | None, float | None]:
    """(what is wrong or None, max abs err, relative error of the norm) of one output against its reference."""
    flat_out, flat_ref, n = out.reshape(-1), ref.reshape(-1), out.numel()
    if not out.is_floating_point():
        wrong = sum(
            (flat_out[s : s + CHUNK] != flat_ref[s : s + CHUNK].to(out.device, out.dtype)).sum().item()
            for s in range(0, n, CHUNK)
        )
        if wrong:
            return f"{wrong} of {n} elements differ (integer output, exact match required)", None, None
        return None, None, None
    work = ref.dtype if ref.is_floating_point() else torch.float64
    nonfinite = n_bad = 0
    abs_err, diff_sq, want_sq = 0.0, 0.0, 0.0
    first = None  # (flat index, got, expected) of the first element outside the tolerance
    for s in range(0, n, CHUNK):
        got = flat_out[s : s + CHUNK].to(work)
        want = flat_ref[s : s + CHUNK].to(got.device, work)
        diff = torch.sub(got, want).abs_()
        limit = want.abs().mul_(tol.rtol).add_(tol.atol)
        # The usual case, all finite, in few passes (a check compares every call of every trial).
        stats = torch.stack(
            [diff.max(), (diff > limit).sum().to(diff.dtype), torch.isfinite(diff).all().to(diff.dtype)]
        )
        top, count, all_finite = stats.tolist()
        if all_finite:
            abs_err = max(abs_err, top)
            norms = torch.stack(
                [
                    torch.linalg.vector_norm(diff, dtype=torch.float64),
                    torch.linalg.vector_norm(want, dtype=torch.float64),
                ]
            )
            d, w = norms.tolist()
            diff_sq, want_sq = diff_sq + d * d, want_sq + w * w
        else:  # NaN/Inf somewhere: a non-finite output where the reference is finite is wrong; both non-finite is not compared
            finite_want = torch.isfinite(want)
            nonfinite += (~torch.isfinite(got) & finite_want).sum().item()
            if nonfinite:
                continue  # reported as such below; the other counts no longer matter
            both = torch.isfinite(got) & finite_want
            diff = diff.where(both, torch.zeros_like(diff))
            abs_err = max(abs_err, diff.max().item())
            diff_sq += torch.linalg.vector_norm(diff, dtype=torch.float64).item() ** 2
            want_sq += (
                torch.linalg.vector_norm(want.where(both, torch.zeros_like(want)), dtype=torch.float64).item() ** 2
            )
            count = ((diff > limit) & both).sum().item()
        if count and first is None:
            bad = (diff > limit) if all_finite else ((diff > limit) & both)
            k = int(torch.nonzero(bad)[0].item())
            first = (s + k, got[k].item(), want[k].item())
        n_bad += int(count)
    if nonfinite:
        return (
            f"{nonfinite} of {n} elements are NaN/Inf where the reference is finite "
            f"(unwritten elements read back as NaN)",
            None,
            None,
        )
    rel_err = (diff_sq**0.5) / max(want_sq**0.5, 1e-30)
    if n_bad:
        index, got_v, want_v = first
        idx = [int(v) for v in torch.unravel_index(torch.tensor(index), tuple(out.shape))]
        return (
            f"{n_bad} of {n} elements outside atol={tol.atol:g} rtol={tol.rtol:g} (max abs err "
            f"{abs_err:.3g}; first at {idx}: got {got_v:.6g}, expected {want_v:.6g})",
            abs_err,
            rel_err,
        )
    bound = tol.norm_bound
    if want_sq > 0 and rel_err > bound:
        # Wrong as a whole although every element is within atol: values far below it (an all-zero
        # softmax over a long row), or many elements each a little off in the same direction.
        return (
            f"the output as a whole is off: ||out - ref|| / ||ref|| = {rel_err:.3g} > {bound:g} "
            f"(every element is within atol={tol.atol:g} rtol={tol.rtol:g}; max abs err {abs_err:.3g})",
            abs_err,
            rel_err,
        )
    return None, abs_err, rel_err
