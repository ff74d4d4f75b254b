"""The kernel monitor: on every call of the candidate that counts, which kernels it launched and which torch
compute it did outside them (the kernel-language check, `not_a_kernel`), and on which CUDA stream.

The fitness rewards a fast kernel of the spec's language, so a candidate could compute with torch (or
torch.compile) and still be correct. `KernelMonitor`, a torch function mode active around a call, counts
launches (Triton's JIT and compiled kernels, the interpreter's, CuTe DSL's compiled functions) and the
torch ops called outside a launch that are not glue (kernel_calls.py); `call_verdict()` judges one call,
`verdict()` all calls since it was made, `stream_verdict()` launches off the caller's stream (unseen by
its timer). `EveryCall` applies the check to each call of a timed loop, so a candidate that asks whether
it is watched finds it is on every call that sets its fitness. Like every check in the candidate's
process it can only fail a candidate: the candidate can reach it (README's trust boundary).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from kernelevolve.harness.runtime.kernel_calls import GLUE_OPS, cute_launchers, made_by_torch_compile, op_name


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
        return _reason("a call", self.call_launches, self.call_compute, language, " on every call")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self._quiet == 0:
            name = op_name(func)
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
                    if made_by_torch_compile(getattr(getattr(kernel, "src", None), "fn", None)):
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
                if made_by_torch_compile(fn_self):
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
        for cls in cute_launchers():
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
        return _reason("forward", self.launches, self.compute_ops, language)


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


def _reason(subject: str, launches, compute: dict, language: str, when: str = "") -> str | None:
    """`subject` ("forward", "a call") launched no kernel of `language`, or computed with torch besides: the
    one-line reason; None when it did neither."""
    if not launches:
        ops = ", ".join(f"torch.{k}" for k in sorted(compute)[:6])
        return (
            f"{subject} launched no {language} kernel"
            + (f"; it computed with {ops}" if ops else "")
            + f": the computation must run in kernels of the spec's language{when}"
        )
    if compute:
        ops = ", ".join(f"torch.{k} x{n}" for k, n in sorted(compute.items())[:6])
        return (
            f"{subject} computed with torch ops outside its {language} kernels ({ops}): torch is for glue "
            f"(allocation, views, casts); list an op in the spec's allow_torch_ops if it is meant"
        )
    return None
