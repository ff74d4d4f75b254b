"""Fixes for bugs of Triton's CPU interpreter (TRITON_INTERPRET=1), Triton 3.6 to 3.9 (stdlib,
numpy and triton only: the harness runs it before any candidate code).

Each fix is applied only where the installed Triton has the bug, decided by its version or by a
probe of the interpreter itself; `patch_triton_interpreter()` returns the names of those applied.

- "index" (triton < 3.7): a loop bound becomes a Python int through int(array) on a one-element
  array, which numpy >= 2.3 refuses ("only 0-dimensional arrays can be converted to Python
  scalars"), so every `for i in range(0, runtime_value)` fails. __index__ uses .item() instead.
- "bf16_dot" (3.6 to at least 3.9, triton#11584): bfloat16 is kept as uint16 and tl.dot multiplies
  those bit patterns. bf16 operands are converted to float32 first (exact, as the GPU's bf16 MMA
  accumulates in fp32). Probed: a 1x1 bf16 dot must give 1.0 * 1.0 = 1.0.
- "bool_masks" (triton >= 3.9): a comparison of two scalars (`pid < n_rows`) holds bool data under
  an int32 handle type, so broadcast and combined with a vector mask it becomes int32 data; 3.6-3.8
  accepted any integer mask, 3.9's load, store and atomics refuse it ("mask has unsupported
  dtype"). Masks are cast to bool on the way in. Probed: a load with an int32 mask.
- "loop_index" (every version checked): the induction variable of `for i in range(...)` (or
  `tl.range`) is a plain Python int in the interpreter, where compiled Triton gives a tensor, so
  `i.to(tl.int64)` fails here and works on the GPU (two drafts of a model-driven campaign failed as
  `compile` so). The interpreter's own rewrite of each kernel's source (which already turns every
  assignment's value into a tensor) also turns such a loop's variable into one; `tl.static_range`
  loops keep plain ints, as compiled Triton does. Probed: `.to()` on a loop variable.
- "device_call_patch" (every version checked; speed, not a bug): the interpreter patches triton.language
  for a launch and again on EVERY call of a `@triton.jit` device function inside it (never undone, the
  launch's own restore undoes all), a third of the time of a kernel that calls helpers in its loops. A
  device function whose language modules the running launch already patched is called as it is.
  Probed: `_patch_lang` and `_LangPatchScope` as this file knows them.
- TF32 (every version; emulation rather than a fix, `emulate_tf32()`, applied in the evaluator's processes): the interpreter multiplies float32 dots
  exactly whatever their input_precision, while the GPU rounds a tf32 dot's inputs to 10 mantissa bits
  (float32 `tl.dot`'s default). The inputs of a TF32 dot are rounded the same way (to nearest, as
  cvt.rna.tf32.f32 does), so a kernel that relies on tf32 where the spec forbids it fails on the CPU
  as it would on the GPU, instead of passing here and failing there.
"""

SUPPORTED_TRITON = ((3, 6), (3, 9))  # oldest and newest minor release this file was checked on


def triton_version() -> tuple[int, int]:
    import triton

    major, minor = triton.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def patch_triton_interpreter() -> list[str]:
    """Apply the fixes this Triton needs (idempotent); the names of those in effect."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    applied = getattr(builder, "_kernelevolve_fixes", None)
    if applied is not None:
        return list(applied)
    applied = []
    if triton_version() < (3, 7):
        _fix_index(interpreter)
        applied.append("index")
    if _bf16_dot_is_wrong(interpreter):
        _fix_bf16_dot(interpreter)
        applied.append("bf16_dot")
    if _int_masks_refused(interpreter):
        _fix_masks(interpreter)
        applied.append("bool_masks")
    if _loop_index_is_an_int(interpreter):
        _fix_loop_index(interpreter)
        applied.append("loop_index")
    if _repatches_device_calls(interpreter):
        _patch_once_per_launch(interpreter)
        applied.append("device_call_patch")
    builder._kernelevolve_fixes = tuple(applied)
    return applied


def round_to_tf32(data):
    """float32 values (numpy) rounded to TF32's 10 mantissa bits, to nearest with ties away from zero."""
    import numpy as np

    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000), bits)
    return rounded.astype(np.uint32).view(np.float32)


def emulate_tf32() -> None:
    """Round the inputs of TF32 dots as the GPU does (idempotent). The evaluator's processes call it, so a
    candidate's verdict on the CPU predicts the GPU's; a kernel's own unit tests keep exact float32 dots."""
    from triton.runtime import interpreter

    if not getattr(interpreter.InterpreterBuilder, "_kernelevolve_tf32", False):
        _emulate_tf32(interpreter)
        interpreter.InterpreterBuilder._kernelevolve_tf32 = True


def _emulate_tf32(interpreter) -> None:
    import triton.language as tl
    from triton._C.libtriton import ir

    create_dot = interpreter.InterpreterBuilder.create_dot
    tf32 = getattr(ir.INPUT_PRECISION, "TF32", None)

    def rounded(handle):
        if handle.dtype.scalar != tl.float32:
            return handle
        return interpreter.TensorHandle(round_to_tf32(handle.data), handle.dtype.scalar)

    def create_dot_tf32(self, a, b, d, input_precision, *args):
        if tf32 is not None and input_precision == tf32:
            a, b = rounded(a), rounded(b)
        return create_dot(self, a, b, d, input_precision, *args)

    interpreter.InterpreterBuilder.create_dot = create_dot_tf32


def _fix_index(interpreter) -> None:
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    interpreter._patch_lang_tensor = patched


def _bf16_dot_is_wrong(interpreter) -> bool:
    import numpy as np
    import triton.language as tl

    one_bf16 = np.array([[0x3F80]], dtype=np.uint16)  # 1.0 in bfloat16
    a = interpreter.TensorHandle(one_bf16, tl.bfloat16)
    d = interpreter.TensorHandle(np.zeros((1, 1), dtype=np.float32), tl.float32)
    try:
        out = interpreter.InterpreterBuilder.create_dot(None, a, a, d, None, 0)
    except Exception:  # an interpreter that cannot run the probe: assume the bug, the fix is exact
        return True
    return float(out.data[0, 0]) != 1.0


def _fix_bf16_dot(interpreter) -> None:
    import numpy as np
    import triton.language as tl

    create_dot = interpreter.InterpreterBuilder.create_dot

    def as_fp32(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        data = interpreter._convert_float(handle.data, tl.bfloat16, tl.float32, None).view(np.float32)
        return interpreter.TensorHandle(data, tl.float32)

    def create_dot_bf16(self, a, b, d, *args):
        return create_dot(self, as_fp32(a), as_fp32(b), d, *args)

    interpreter.InterpreterBuilder.create_dot = create_dot_bf16


def _int_masks_refused(interpreter) -> bool:
    import numpy as np

    buf = np.zeros(1, dtype=np.float32)
    ptrs = np.array([buf.ctypes.data], dtype=np.uint64)
    try:
        interpreter._interpreter.load(
            ptrs, np.ones(1, dtype=np.int32), np.zeros(1, dtype=np.float32), np.dtype(np.float32)
        )
    except (ValueError, TypeError):
        return True
    return False


def _fix_masks(interpreter) -> None:
    import numpy as np
    import triton.language as tl

    builder = interpreter.InterpreterBuilder

    def as_bool(mask):
        if mask is None or getattr(mask, "data", None) is None or mask.data.dtype == np.bool_:
            return mask
        return interpreter.TensorHandle(mask.data != 0, tl.int1)

    # (method, index of the mask among the arguments after self): the same in 3.6 through 3.9.
    for name, at in (("create_masked_load", 1), ("create_masked_store", 2), ("create_atomic_rmw", 3)):
        original = getattr(builder, name)

        def fixed(self, *args, _original=original, _at=at, **kwargs):
            if len(args) > _at:
                args = args[:_at] + (as_bool(args[_at]),) + args[_at + 1 :]
            elif "mask" in kwargs:
                kwargs["mask"] = as_bool(kwargs["mask"])
            return _original(self, *args, **kwargs)

        setattr(builder, name, fixed)


def _loop_index_is_an_int(interpreter) -> bool:
    """Whether the interpreter's rewrite of a kernel leaves a `range` loop's variable a Python int."""
    import ast

    from kernelevolve import pysource

    transformer = getattr(interpreter, "ASTTransformer", None)
    if transformer is None:
        return False
    tree = pysource.parse("for i in range(3):\n    pass\n")
    return not any(
        isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "to_tensor"
        for n in ast.walk(transformer().visit(tree))
    )


def _fix_loop_index(interpreter) -> None:
    import ast

    transformer = interpreter.ASTTransformer
    previous = getattr(transformer, "visit_For", None)

    def visit_For(self, node):
        node = previous(self, node) if previous is not None else self.generic_visit(node)
        it = node.iter
        func = it.func if isinstance(it, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        if name == "range" and isinstance(node.target, ast.Name):  # range or tl.range, not tl.static_range
            as_tensor = ast.Assign(
                targets=[ast.Name(node.target.id, ast.Store())],
                value=ast.Call(
                    func=ast.Attribute(ast.Name("interpreter_semantic", ast.Load()), "to_tensor", ast.Load()),
                    args=[ast.Name(node.target.id, ast.Load()), ast.Constant(False)],
                    keywords=[],
                ),
            )
            node.body.insert(0, ast.fix_missing_locations(ast.copy_location(as_tensor, node)))
        return node

    transformer.visit_For = visit_For


def _repatches_device_calls(interpreter) -> bool:
    import inspect

    try:
        call = inspect.getsource(interpreter.InterpretedFunction.__call__)
        launch = inspect.getsource(interpreter.GridExecutor.__call__)
    except (AttributeError, OSError, TypeError):
        return False
    return (
        "_patch_lang(self.fn)" in call
        and "patch_scope = _patch_lang(self.fn)" in launch
        and "patch_scope.restore()" in launch
        and hasattr(interpreter, "_LangPatchScope")
    )


def _patch_once_per_launch(interpreter) -> None:
    import sys

    import triton.language as tl

    original = interpreter._patch_lang
    launch = interpreter.GridExecutor.__call__.__code__
    patched_now: list[frozenset] = []  # the language modules of each launch running now, innermost last

    def languages(fn) -> frozenset:
        return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)

    class LaunchScope:
        def __init__(self, scope) -> None:
            self.scope = scope

        def restore(self) -> None:
            patched_now.pop()
            self.scope.restore()

    class AlreadyPatched:
        def restore(self) -> None:
            pass

    def patch_lang(fn):
        if sys._getframe(1).f_code is launch:  # a launch: patched, and undone by its restore()
            scope = original(fn)
            patched_now.append(languages(fn))
            return LaunchScope(scope)
        if not patched_now:  # a device function called outside any launch
            return original(fn)
        wanted = languages(fn)
        if wanted <= patched_now[-1]:  # a device call inside a launch that patched its modules already
            return AlreadyPatched()
        scope = original(fn)  # never undone by the interpreter: in effect for the rest of the launch
        patched_now[-1] = patched_now[-1] | wanted
        return scope

    interpreter._patch_lang = patch_lang
