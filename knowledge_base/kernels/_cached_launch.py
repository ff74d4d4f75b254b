"""Launching a kernel Triton has already compiled (tl or Gluon) without the JIT's argument binding: the host
side of decode kernels whose device time is a few tens of microseconds (int8_mqa_decode.py's tl kernel and
_decode_hopper.py's Gluon kernel). The JIT binds and specialises every argument on every call (16-100 us of
host time at decode's argument counts); a plan that keeps the CompiledKernel of its shape calls it directly."""

import triton


def knobs_hook():
    """Triton's launch hook if one is installed (a profiler such as proton): then launches go
    through the JIT. Triton 3.6 keeps an empty HookChain there when none is (never None)."""
    hook = triton.knobs.runtime.launch_enter_hook
    if hook is None or getattr(hook, "calls", None) == []:
        return None
    return hook


def launchable(compiled) -> bool:
    """Whether what a JIT launch returned can be launched directly (Triton 3.x's CompiledKernel)."""
    return all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata"))


def launch(compiled, grid: tuple, tensors: tuple, rest: tuple) -> bool:
    """The call the JIT makes once it has found the kernel: tensors, then every other parameter in order
    (constexprs too). Only for arguments the kernel was specialised for: 16-byte aligned pointers (the caller's
    plan key holds shapes and strides); False (nothing launched) to take the JIT."""
    if knobs_hook() is not None or any(t.data_ptr() & 15 for t in tensors):
        return False
    device = triton.runtime.driver.active.get_current_device()
    stream = triton.runtime.driver.active.get_current_stream(device)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    compiled.run(*grid, stream, compiled.function, compiled.packed_metadata, None, None, None, *tensors, *rest)
    return True
