"""Checking a candidate's outputs against the reference computed in higher precision."""

from __future__ import annotations

import contextlib
import copy

import torch

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


def reference_outputs(model, inputs: list, synchronize=None) -> tuple[list, list]:
    """(outputs at the case's dtype, outputs in float64 — or float32 where float64 cannot run)."""
    expected = [t.detach().clone() for t in flatten(run_model(model, inputs, synchronize))]
    for precise in (torch.float64, torch.float32):
        try:
            m = copy.deepcopy(model).to(precise)
            xs = [x.to(precise) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            return expected, [t.detach() for t in flatten(run_model(m, xs, synchronize))]
        except (RuntimeError, TypeError, NotImplementedError):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    raise RuntimeError("the reference could not run in float64 or float32")


def compare(outs: list, expected: list, refs: list, tol: dict) -> tuple[bool, str, float | None, float | None]:
    """(ok, message, max_abs_err, max_rel_err) for one call's outputs."""
    if len(outs) != len(expected):
        return False, f"forward returned {len(outs)} tensors, reference returns {len(expected)}", None, None
    max_abs, max_rel = 0.0, 0.0
    for i, (out, exp, ref) in enumerate(zip(outs, expected, refs)):
        where = f"output {i}: " if len(outs) > 1 else ""
        if not isinstance(out, torch.Tensor):
            return False, f"{where}a {type(out).__name__}, expected a tensor", None, None
        if tuple(out.shape) != tuple(exp.shape):
            return False, f"{where}shape {tuple(out.shape)}, expected {tuple(exp.shape)}", None, None
        if out.dtype != exp.dtype:
            return False, f"{where}dtype {out.dtype}, expected {exp.dtype}", None, None
        if out.numel() == 0:
            continue
        got = out.detach().to(torch.float64) if out.is_floating_point() else out.detach()
        want = ref.detach().to(got.device)
        if not out.is_floating_point():
            wrong = (got != want.to(got.dtype)).sum().item()
            if wrong:
                return (
                    False,
                    (f"{where}{wrong} of {out.numel()} elements differ (integer output, exact match required)"),
                    None,
                    None,
                )
            continue
        bad_nonfinite = (~torch.isfinite(got) & torch.isfinite(want)).sum().item()
        if bad_nonfinite:
            return (
                False,
                f"{where}{bad_nonfinite} of {out.numel()} elements are NaN/Inf where the reference is "
                f"finite (unwritten elements read back as NaN)",
                None,
                None,
            )
        both = torch.isfinite(got) & torch.isfinite(want)
        diff = (got - want).abs().where(both, torch.zeros_like(got))
        limit = tol["atol"] + tol["rtol"] * want.abs()
        bad = (diff > limit) & both
        abs_err = diff.max().item()
        rel_err = (diff.norm() / want.where(both, torch.zeros_like(want)).norm().clamp_min(1e-30)).item()
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        n_bad = bad.sum().item()
        if n_bad:
            idx = tuple(int(v) for v in torch.nonzero(bad)[0].tolist())
            return (
                False,
                f"{where}{n_bad} of {out.numel()} elements outside atol={tol['atol']:g} "
                f"rtol={tol['rtol']:g} (max abs err {abs_err:.3g}; first at {list(idx)}: "
                f"got {got[idx].item():.6g}, expected {want[idx].item():.6g})",
                abs_err,
                rel_err,
            )
    return True, "", max_abs, max_rel
