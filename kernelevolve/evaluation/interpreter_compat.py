"""A fix for triton 3.6's CPU interpreter under numpy >= 2.3 (stdlib + triton only).

The interpreter turns a loop bound into a Python int with int(array) on a one-element array,
which numpy >= 2.3 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so
every `for i in range(0, runtime_value)` in a kernel fails. We re-patch __index__ with .item().
The harness embeds this file's source (it stays a standalone script); tests import it.
"""


def patch_triton_interpreter() -> None:
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_kernelevolve_fixed", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched._kernelevolve_fixed = True
    interpreter._patch_lang_tensor = patched
