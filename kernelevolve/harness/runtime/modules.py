"""Loading the reference and the candidate, and building their models and inputs.

The reference follows the KernelBench convention (Model, get_inputs, get_init_inputs, module
constants); a case's parameters replace top-level constant assignments before the module body
runs, so constants derived from them follow the shape. The rewriting (constant expressions,
chained and unpacking assignments, tuple values) is kernelevolve/shapes.py's, the same code
that checks `--shape` values when a spec is loaded.
"""

from __future__ import annotations

import sys
import types

import torch

from kernelevolve import pysource

DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class ConstructionError(Exception):
    """ModelNew(*get_init_inputs()) raised; the cause is the candidate's exception."""


def load_module(path: str, name: str, overrides: dict | None = None) -> types.ModuleType:
    with open(path) as f:
        source = f.read()
    tree = pysource.parse(source, filename=path)
    if overrides:
        from kernelevolve.shapes import override_tree

        override_tree(tree, overrides)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # triton.jit needs to find the kernel's module source
    exec(compile(tree, path, "exec"), module.__dict__)
    return module


def trial_seed(base: int, case_index: int, trial: int) -> int:
    """The seed of one correctness trial (its reference's parameters; its inputs use seed + 17): the
    candidate's process and the judge derive the same inputs from it."""
    return base + 1000 * trial + 7 * (case_index + 1)


def pool_seed(base: int, k: int) -> int:
    """The seed of a timing process's k-th input set (value pools first, then buffers)."""
    return base + 17 + 101 * k


def dtype_of(case) -> torch.dtype | None:
    """The torch dtype of a case: a configs.Case, or a plain dict with a "dtype" (the profiling harnesses')."""
    return DTYPES.get(case["dtype"] if isinstance(case, dict) else case.dtype)


def to_device(obj, dtype, device: str):
    """Floating tensors take the case's dtype; integer and bool tensors keep theirs (KernelBench)."""
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj if obj.is_contiguous() else obj.contiguous()
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(x, dtype, device) for x in obj)
    return obj


def make_inputs(ref_module, seed: int, dtype, device: str) -> list:
    torch.manual_seed(seed)
    with torch.device(device):  # factories default to the device: no slow CPU randn + copy
        inputs = ref_module.get_inputs()
    return [to_device(x, dtype, device) for x in inputs]


def build_reference(ref_module, seed: int, dtype, device: str) -> torch.nn.Module:
    """The reference with perturbed parameters, so all-ones weights cannot hide a bug."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = ref_module.Model(*ref_module.get_init_inputs())
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                p.mul_(1 + 0.5 * (2 * torch.rand(p.shape, generator=gen, dtype=p.dtype).to(p.device) - 1))
                p.add_(0.05 * torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device))
    model = model.to(device)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()


def build_candidate(ref_module, cand_module, reference: torch.nn.Module, seed: int, dtype, device: str):
    """ModelNew built with the reference's init inputs and given its parameter values."""
    torch.manual_seed(seed)
    try:
        with torch.device(device):
            new = cand_module.ModelNew(*ref_module.get_init_inputs())
    except Exception as exc:
        raise ConstructionError(exc) from exc
    own = new.state_dict()
    shared = {k: v for k, v in reference.state_dict().items() if k in own and own[k].shape == v.shape}
    if shared:
        new.load_state_dict(shared, strict=False)
    new = new.to(device)
    if dtype is not None:
        new = new.to(dtype)
    return new.eval()


def flatten(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for x in out for t in flatten(x)]
    raise TypeError(f"forward returned {type(out).__name__}, expected tensors")
