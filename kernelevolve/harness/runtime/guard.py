"""What keeps a hostile candidate from gaming its own evaluation (it runs in this process).

- `Tripwire`: the identity of every callable in the modules a judge relies on, taken before the
  candidate is imported, compared after it ran (a replaced `torch.allclose` is tampering);
- `KernelMonitor`: which Triton kernels a forward launched and which torch compute ops it called
  outside them (the kernel-language check); `EveryCall` applies it to each call of a loop;
- `InputGuard`: inputs unchanged after a call, outputs not aliasing an input.
The static screen (screen.py) runs before any of this; the OS sandbox (sandbox.py) contains what the process can do to the outside; these checks keep
what it reports honest.
"""

from __future__ import annotations

import builtins
import sys
import time
import types

import torch
from torch.overrides import TorchFunctionMode


# -- tripwire -------------------------------------------------------------------------------
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


# -- kernel-language check ------------------------------------------------------------------
def _made_by_torch_compile(fn) -> bool:
    """Whether a JIT function's source is a module torch.compile (inductor) wrote into its cache: the
    evaluation's TORCHINDUCTOR_CACHE_DIR (evaluator.py gives each its own), else inductor's default
    /tmp/torchinductor_USER."""
    import os

    inner = getattr(fn, "fn", None)
    code = getattr(inner, "__code__", None)
    if code is None:
        return False
    path = os.path.realpath(code.co_filename)
    roots = [os.environ.get("TORCHINDUCTOR_CACHE_DIR")]
    return any(r and path.startswith(os.path.realpath(r) + os.sep) for r in roots) or "/torchinductor_" in path


# Torch calls that only allocate, reshape, view, cast or describe tensors: glue around kernels.
GLUE_OPS = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "zeros",
    "zeros_like",
    "new_zeros",
    "ones",
    "ones_like",
    "new_ones",
    "full",
    "full_like",
    "new_full",
    "arange",
    "tensor",
    "as_tensor",
    "new_tensor",
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "contiguous",
    "stride",
    "size",
    "numel",
    "dim",
    "ndimension",
    "permute",
    "transpose",
    "t",
    "T",
    "mT",
    "expand",
    "expand_as",
    "unsqueeze",
    "squeeze",
    "flatten",
    "unflatten",
    "narrow",
    "select",
    "__getitem__",
    "split",
    "chunk",
    "unbind",
    "as_strided",
    "movedim",
    "to",
    "type",
    "float",
    "half",
    "bfloat16",
    "double",
    "int",
    "long",
    "bool",
    "is_contiguous",
    "data_ptr",
    "element_size",
    "storage_offset",
    "is_floating_point",
    "is_complex",
    "device",
    "dtype",
    "shape",
    "get_device",
    "fill_",
    "zero_",
    "copy_",
    "clone",
    "detach",
    "requires_grad_",
    "is_cuda",
    "layout",
    "ndim",
    "nbytes",
    "itemsize",
    "untyped_storage",
    "__len__",
    "__iter__",
    "__format__",
    "__repr__",
    "__bool__",
    "__index__",
    "__int__",
    "item",
    "tolist",
    "cpu",
    "cuda",
    "is_leaf",
    "requires_grad",
    "grad",
    "data",
    "names",
    "__setitem__",
    "is_set_to",
    "storage",
    "_is_view",
    "_base",
    "is_sparse",
    "is_quantized",
    "is_meta",
    "is_nested",
    "is_mkldnn",
    "output_nr",
    "_version",
    "__hash__",
    "__eq__",
    "__ne__",
    "__contains__",
    "__reduce_ex__",
    "__deepcopy__",
    "__get__",
    "cat",
    "stack",
    "empty_cache",
    "current_stream",
    "current_device",
    "get_device_properties",
    "device_count",
    "synchronize",
    "parameters",
    "buffers",
    "named_parameters",
    "dim_order",
    "is_pinned",
    "real",
    "imag",
    "_set_grad_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "is_autocast_enabled",
    "__dlpack__",  # CuTe DSL's from_dlpack: a view of the tensor handed to its kernels
    "__dlpack_device__",
    # Questions about dtypes and shapes, answered without touching a value (a matmul picking its output
    # dtype with torch.result_type was refused as torch compute in a model-driven campaign).
    "result_type",
    "promote_types",
    "can_cast",
    "is_tensor",
    "is_storage",
    "get_default_dtype",
    "broadcast_shapes",
    "is_same_size",
    "is_signed",
    "is_inference",
}

# CuTe DSL (nvidia-cutlass-dsl): the classes whose calls launch a compiled host function, which launches
# its kernels: what cute.compile returns (one class per backend and version) and its per-device executor.
CUTE_LAUNCHERS = (
    ("cutlass.base_dsl.jit_executor", "JitExecutor"),
    ("cutlass.base_dsl.jit_executor", "JitCompiledFunction"),
    ("cutlass.cutlass_dsl.cuda_jit_executor", "CudaDialectJitCompiledFunction"),
    ("cutlass.cutlass_dsl.cutlass_function", "CutlassCallJitCompiledFunction"),
    ("cutlass.cutlass_dsl.tvm_ffi_provider", "TVMFFIJitCompiledFunction"),
    ("cutlass.cutlass_dsl.tvm_ffi_provider", "TVMFFIJitCompiledFunctionWithKwargs"),
)


def _cute_launchers() -> list[type]:
    """The CuTe DSL launcher classes, only where the candidate imported CuTe DSL (never imported here)."""
    if "cutlass" not in sys.modules:
        return []
    found = []
    for module, name in CUTE_LAUNCHERS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return found


def _op_name(func) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a property such as Tensor.shape
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    return name


class KernelMonitor(TorchFunctionMode):
    """While active: kernel launches by name (Triton kernels, CuTe DSL compiled functions), and torch ops
    called outside a launch."""

    def __init__(self, allowed_ops: set[str] | frozenset[str] = frozenset()):
        super().__init__()
        self.allowed = set(allowed_ops) | GLUE_OPS
        self.launches: dict[str, int] = {}
        self.compute_ops: dict[str, int] = {}
        self._depth = 0  # launches in progress: one inside another is not counted again
        self._quiet = 0  # launches in progress whose own torch calls (the launcher's) are not the candidate's
        self._patched: list[tuple[type, str, object]] = []
        # The caller's CUDA stream: Triton launches on any other stream escape the caller's timer.
        self.home_stream = torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else None
        self.off_stream: dict[str, int] = {}
        # The current call's own counts (reset_call): every call is judged, not only the first ones.
        self.call_launches = 0
        self.call_compute: dict[str, int] = {}

    def reset_call(self) -> None:
        self.call_launches = 0
        self.call_compute = {}

    def call_verdict(self, language: str = "triton") -> str | None:
        """None when the call since reset_call() computed with kernels only; else the reason."""
        if not self.call_launches:
            ops = ", ".join(f"torch.{k}" for k in sorted(self.call_compute)[:6])
            return (
                f"a call launched no {language} kernel"
                + (f"; it computed with {ops}" if ops else "")
                + ": the computation must run in kernels of the spec's language on every call"
            )
        if self.call_compute:
            ops = ", ".join(f"torch.{k} x{n}" for k, n in sorted(self.call_compute.items())[:6])
            return (
                f"a call computed with torch ops outside its {language} kernels ({ops}): torch is for glue "
                f"(allocation, views, casts); list an op in the spec's allow_torch_ops if it is meant"
            )
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self._quiet == 0:
            name = _op_name(func)
            if name not in self.allowed and name.rstrip("_") not in self.allowed:
                self.compute_ops[name] = self.compute_ops.get(name, 0) + 1
                self.call_compute[name] = self.call_compute.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    def _record(self, names: list[str]) -> None:
        off = self.home_stream is not None and torch.cuda.current_stream().cuda_stream != self.home_stream
        self.call_launches += len(names)
        for name in names:
            self.launches[name] = self.launches.get(name, 0) + 1
            if off:
                self.off_stream[name] = self.off_stream.get(name, 0) + 1

    def _record_generated(self, name: str) -> None:
        """A Triton kernel that torch.compile generated: torch compute, not the candidate's kernel."""
        key = f"compile[{name}]"
        self.compute_ops[key] = self.compute_ops.get(key, 0) + 1
        self.call_compute[key] = self.call_compute.get(key, 0) + 1

    def _wrap_compiled_run(self) -> None:
        """A compiled Triton kernel launched directly (CompiledKernel.run, as a launcher that skips the JIT's
        argument binding does) is a Triton kernel too: the `run` property hands out a counting launcher."""
        try:
            from triton.compiler.compiler import CompiledKernel
        except ImportError:
            return
        original = CompiledKernel.__dict__.get("run")
        if not isinstance(original, property):
            return
        monitor = self

        def counted(kernel):
            launcher = original.fget(kernel)

            def launch(*args, **kwargs):
                if monitor._depth == 0:
                    name = getattr(kernel, "name", None) or "kernel"
                    if _made_by_torch_compile(getattr(getattr(kernel, "src", None), "fn", None)):
                        monitor._record_generated(name)
                    else:
                        monitor._record([name])
                monitor._depth += 1
                monitor._quiet += 1
                try:
                    return launcher(*args, **kwargs)
                finally:
                    monitor._depth -= 1
                    monitor._quiet -= 1

            return launch

        CompiledKernel.run = property(counted)
        self._patched.append((CompiledKernel, "run", original))

    def _wrap(self, cls: type, attr: str, quiet: bool = True) -> None:
        """`cls.attr` (a launch) counted as one of the spec's language. While it runs, torch calls are not the
        candidate's when `quiet` (a GPU launcher's own bookkeeping), except in its pre-run hooks, which are
        the candidate's code run at the launch; under the interpreter (`quiet` False) a kernel's body is
        Python, and torch compute called from it is the candidate's too."""
        original = cls.__dict__.get(attr)
        if original is None:
            return
        monitor = self

        def launch(fn_self, *args, **kwargs):
            # A CuTe DSL compiled function names the device kernels it launches (kernel_info): those are
            # the names the profiler sees on the GPU, as a Triton kernel's is its function's name.
            names = list(getattr(fn_self, "kernel_info", None) or ()) or [
                getattr(getattr(fn_self, "fn", None), "__name__", None)
                or getattr(fn_self, "__name__", None)
                or getattr(fn_self, "function_name", None)
                or "kernel"
            ]
            if monitor._depth == 0:
                if _made_by_torch_compile(fn_self):
                    monitor._record_generated(names[0])
                else:
                    monitor._record(names)
            hooks = getattr(fn_self, "pre_run_hooks", None)
            saved = list(hooks) if isinstance(hooks, list) and hooks else None
            if saved is not None:
                hooks[:] = [monitor._heard(h) for h in saved]
            monitor._depth += 1
            monitor._quiet += quiet
            try:
                return original(fn_self, *args, **kwargs)
            finally:
                monitor._depth -= 1
                monitor._quiet -= quiet
                if saved is not None:
                    hooks[:] = saved

        setattr(cls, attr, launch)
        self._patched.append((cls, attr, original))

    def _heard(self, hook):
        """`hook` with its torch calls counted as the candidate's (they run inside a launch)."""
        monitor = self

        def heard(*args, **kwargs):
            quiet, monitor._quiet = monitor._quiet, 0
            try:
                return hook(*args, **kwargs)
            finally:
                monitor._quiet = quiet

        return heard

    def __enter__(self):
        from triton.runtime.jit import JITFunction

        self._wrap(JITFunction, "run")
        self._wrap_compiled_run()
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._wrap(InterpretedFunction, "run", quiet=False)
        except ImportError:
            pass
        for cls in _cute_launchers():
            self._wrap(cls, "__call__")
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        for cls, attr, original in reversed(self._patched):
            setattr(cls, attr, original)
        self._patched.clear()
        return out

    def stream_verdict(self) -> str | None:
        """None when every launch used the caller's current stream; else the one-line reason."""
        if not self.off_stream:
            return None
        names = ", ".join(f"{k} x{n}" for k, n in sorted(self.off_stream.items())[:4])
        return (
            f"kernels launched on a stream other than the caller's current stream ({names}): their work is "
            f"unseen by the caller's timer and unordered with its next call"
        )

    def verdict(self, language: str = "triton") -> str | None:
        """None when the forward computed with kernels; else the one-line reason it did not."""
        if not self.launches:
            ops = ", ".join(f"torch.{k}" for k in sorted(self.compute_ops)[:6])
            return (
                f"forward launched no {language} kernel"
                + (f"; it computed with {ops}" if ops else "")
                + ": the computation must run in kernels of the spec's language"
            )
        if self.compute_ops:
            ops = ", ".join(f"torch.{k} x{n}" for k, n in sorted(self.compute_ops.items())[:6])
            return (
                f"forward computed with torch ops outside its {language} kernels ({ops}): torch is for glue "
                f"(allocation, views, casts); list an op in the spec's allow_torch_ops if it is meant"
            )
        return None


class EveryCall:
    """`fn` with the kernel-language check on each of its calls, for a loop run with `monitor` active
    around all of them (the timed calls: a candidate that asks whether it is watched finds it is on every
    call that sets its fitness). The check is host work inside the call, which the timed loop's GPU
    spin hides from the events; `failed` is the first call that failed, as (index, reason)."""

    def __init__(self, fn, monitor: KernelMonitor, language: str = "triton") -> None:
        self.fn, self.monitor, self.language = fn, monitor, language
        self.calls = 0
        self.failed: tuple[int, str] | None = None

    def __call__(self, *args):
        self.monitor.reset_call()
        out = self.fn(*args)
        if self.failed is None and (reason := self.monitor.call_verdict(self.language)):
            self.failed = (self.calls, reason)
        self.calls += 1
        return out


# -- inputs ---------------------------------------------------------------------------------
class InputGuard:
    """A copy of the inputs before a call, to tell whether the call wrote into them."""

    def __init__(self, inputs: list):
        self.inputs = inputs
        self.copies = [x.detach().clone() if isinstance(x, torch.Tensor) else None for x in inputs]

    def mutated(self) -> list[int]:
        bad = []
        for i, (x, c) in enumerate(zip(self.inputs, self.copies)):
            if c is not None and not (x.shape == c.shape and x.dtype == c.dtype and _same_bits(x.detach(), c)):
                bad.append(i)
        return bad

    def aliased(self, outputs: list) -> list[tuple[int, int]]:
        """(output, input) pairs whose memory overlaps: a view of an input is not a result."""
        spans = []
        for i, x in enumerate(self.inputs):
            if isinstance(x, torch.Tensor) and x.numel():
                start = x.untyped_storage().data_ptr()
                spans.append((i, start, start + x.untyped_storage().nbytes()))
        pairs = []
        for o, out in enumerate(outputs):
            if not isinstance(out, torch.Tensor) or not out.numel():
                continue
            s = out.untyped_storage().data_ptr()
            e = s + out.untyped_storage().nbytes()
            pairs += [(o, i) for i, a, b in spans if s < b and a < e]
        return pairs


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe: a NaN written into an input is a change, one left alone is not)."""
    if not a.numel():
        return True
    return torch.equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))
