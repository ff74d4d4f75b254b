"""What the kernel monitor (kernel_monitor.py) counts: which torch calls are glue and which calls launch a
kernel of the spec's language.

A spec says its operator is computed by kernels of a language (Triton by default); torch is for glue:
allocation, views, casts and questions about shapes and dtypes (`GLUE_OPS`). Any other torch op a
forward calls outside a launch is compute, and so is a Triton kernel torch.compile generated
(`made_by_torch_compile`): either makes the call `not_a_kernel`, unless the spec lists the op in
`allow_torch_ops`. Triton's launches are counted at `JITFunction.run` (and the interpreter's); another
language's launches at the classes its compiled functions are made of (`CUTE_LAUNCHERS`): a new
language whose kernels are not launched by Triton's runtime adds its launcher classes here.
"""

from __future__ import annotations

import sys


def made_by_torch_compile(fn) -> bool:
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


def cute_launchers() -> list[type]:
    """The CuTe DSL launcher classes, only where the candidate imported CuTe DSL (never imported here)."""
    if "cutlass" not in sys.modules:
        return []
    found = []
    for module, name in CUTE_LAUNCHERS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return found


def op_name(func) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a property such as Tensor.shape
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    return name
