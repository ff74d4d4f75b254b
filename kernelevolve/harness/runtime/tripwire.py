"""The tripwire: a candidate that replaces a callable its own evaluation relies on is `tampering`.

The candidate runs in the harness's process, so it can rebind `torch.allclose`, `time.perf_counter`,
`json.dump`, a `torch.Tensor` method or a builtin, and so change what the harness measures or writes.
`Tripwire()` is taken before the candidate is imported: the identity of every callable of the modules and
classes a check or a timer uses; `changed()`, asked after each call, names those replaced since and those
added where they would shadow one. It is an early refusal with a good message, not the wall: the verdict
is the judge's (judge.py, a process that never imports the candidate), and the static screen (screen.py)
refuses the patches it can see in the source before any process starts.
"""

from __future__ import annotations

import builtins
import sys
import time
import types

import torch


def _watched() -> list[tuple[str, object]]:
    import triton
    import triton.testing

    objs = [
        ("torch", torch),
        ("torch.Tensor", torch.Tensor),
        ("torch.nn.functional", torch.nn.functional),
        ("torch.nn.Module", torch.nn.Module),
        ("torch.testing", torch.testing),
        ("triton", triton),
        ("triton.testing", triton.testing),
        ("time", time),
        ("builtins", builtins),
        ("json", sys.modules["json"]),
        ("os", sys.modules["os"]),
    ]
    if torch.cuda.is_available():
        objs += [("torch.cuda", torch.cuda), ("torch.cuda.Event", torch.cuda.Event)]
    return objs


class Tripwire:
    """Remembers every callable the judge may use; `changed()` names those replaced since, and
    those added where they would shadow one (a class attribute over a base-class method)."""

    def __init__(self) -> None:
        self._objs = dict(_watched())
        self._keys = {name: set(vars(obj)) for name, obj in self._objs.items()}
        self._seen = {
            (name, key): value
            for name, obj in self._objs.items()
            for key, value in list(vars(obj).items())
            if callable(value) or isinstance(value, (staticmethod, classmethod, property))
        }

    def changed(self) -> list[str]:
        out = []
        for (name, key), value in self._seen.items():
            current = vars(self._objs[name]).get(key, None)
            if current is not value and not _torch_own_wrapper(current, value):
                out.append(f"{name}.{key}")
        for name, obj in self._objs.items():
            for key in set(vars(obj)) - self._keys[name] - _CACHED_BY_PYTHON:
                if key.startswith(_MARKED_BY_DYNAMO):  # torch.compile's own marks: the kernel check answers it
                    continue
                value = vars(obj)[key]
                if isinstance(obj, type) or isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                    out.append(f"{name}.{key}")
        return sorted(out)


# Attributes Python itself caches on a class the first time it is used so (copyreg, pickling a tensor:
# torch.save): not the candidate's doing.
_CACHED_BY_PYTHON = {"__slotnames__"}
# What torch.compile adds to classes it traces (torch.nn.Module.___needs_generation_tag_patch): a name no
# judge uses and that shadows nothing. A candidate using torch.compile is `not_a_kernel`, not tampering.
_MARKED_BY_DYNAMO = "___"


def _torch_own_wrapper(current, original) -> bool:
    """torch._dynamo, when first imported (by the profiler, say), rebinds a few torch functions to
    wrappers made in torch/_compile.py around the originals; its first compile wraps
    torch.nn.Module.__init__ and __setstate__ (torch/_dynamo/mutation_guard.py) to tag new modules. Not
    the candidate's doing: a candidate using torch.compile is `not_a_kernel` (the kernel check), not
    tampering. (Importing torch._dynamo up front instead costs seconds per evaluation.)"""
    code = getattr(current, "__code__", None)
    if code is None:
        return False
    where = code.co_filename.replace("\\", "/")
    if where.endswith("torch/_compile.py"):
        return getattr(current, "__wrapped__", None) is original
    if where.endswith("torch/_dynamo/mutation_guard.py"):  # calls the original, held in its closure
        return any(cell.cell_contents is original for cell in getattr(current, "__closure__", None) or ())
    return False
