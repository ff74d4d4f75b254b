"""A fix for triton 3.6's CPU interpreter under numpy >= 2.3 (stdlib + triton only).

The interpreter turns a loop bound into a Python int with int(array) on a one-element array,
which numpy >= 2.3 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so
every `for i in range(0, runtime_value)` in a kernel fails. We re-patch __index__ with .item().
It also keeps bfloat16 as uint16 and its tl.dot multiplies those bit patterns (triton#11584):
bf16 operands are converted to float32 first (exact, as the GPU's bf16 MMA accumulates in fp32).
The harness embeds this file's source (it stays a standalone script); tests import it.
"""


def patch_triton_interpreter() -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_kernelevolve_fixed", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched._kernelevolve_fixed = True
    interpreter._patch_lang_tensor = patched

    create_dot = interpreter.InterpreterBuilder.create_dot

    def as_fp32(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        data = interpreter._convert_float(handle.data, tl.bfloat16, tl.float32, None).view(np.float32)
        return interpreter.TensorHandle(data, tl.float32)

    def create_dot_bf16(self, a, b, d, *args):
        return create_dot(self, as_fp32(a), as_fp32(b), d, *args)

    interpreter.InterpreterBuilder.create_dot = create_dot_bf16
