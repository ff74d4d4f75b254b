"""The evaluator's contract, stated once in every kernel prompt.

Everything here is read from what the evaluator itself uses, so the prompt cannot drift from the
checks: the spec's cases for the device (the shapes checked now, the shapes timed on the GPU), its
dtypes and `Spec.tolerance` (atol, rtol and the whole-output norm bound), `allow_torch_ops`,
`inplace` and `tf32`; the evaluator's number of trials (`Evaluator`'s default) and the harness's
repeated calls (`harness.runtime.correctness.REPEAT_CALLS`, `repeat_plan`); the reference's
parameter names, read from its `__init__` (parsed, never executed).
"""

from __future__ import annotations

import ast
import inspect

from kernelevolve import pysource
from kernelevolve.spec import Spec, format_value, shape_text

# What `harness.runtime.compare.poisoned_allocations` replaces while a candidate runs (checked by
# tests/operators/test_contract.py against the real context manager).
POISONED = ("torch.empty", "torch.empty_like", "torch.empty_strided", "Tensor.new_empty")

# State-dict entries of the usual nn modules (a module not listed is shown as `name.*`).
_MODULE_PARAMS = {
    "Linear": ("weight", "bias"),
    "Bilinear": ("weight", "bias"),
    "LazyLinear": ("weight", "bias"),
    "Conv1d": ("weight", "bias"),
    "Conv2d": ("weight", "bias"),
    "Conv3d": ("weight", "bias"),
    "ConvTranspose1d": ("weight", "bias"),
    "ConvTranspose2d": ("weight", "bias"),
    "ConvTranspose3d": ("weight", "bias"),
    "LayerNorm": ("weight", "bias"),
    "GroupNorm": ("weight", "bias"),
    "RMSNorm": ("weight",),
    "BatchNorm1d": ("weight", "bias", "running_mean", "running_var"),
    "BatchNorm2d": ("weight", "bias", "running_mean", "running_var"),
    "BatchNorm3d": ("weight", "bias", "running_mean", "running_var"),
    "Embedding": ("weight",),
    "EmbeddingBag": ("weight",),
    "PReLU": ("weight",),
}
# Modules without parameters (activations, pooling, dropout, shape helpers): nothing to copy.
_NO_PARAMS = {
    "ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "LeakyReLU", "ELU", "SELU", "CELU", "Hardtanh",
    "Hardswish", "Hardsigmoid", "Softplus", "Softsign", "Mish", "LogSigmoid", "Softmax", "LogSoftmax",
    "Softmin", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "Identity", "Flatten", "Unflatten",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "KLDivLoss", "SmoothL1Loss", "HuberLoss",
    "Upsample", "PixelShuffle", "ZeroPad2d", "ConstantPad2d",
}  # fmt: skip


def evaluator_trials() -> int:
    """The number of correctness trials an Evaluator makes unless told otherwise."""
    from kernelevolve.evaluation.evaluator import Evaluator

    return int(inspect.signature(Evaluator.__init__).parameters["trials"].default)


def reference_state(source: str) -> list[str]:
    """The reference Model's parameters and buffers by state-dict name, as far as its __init__
    shows them: `gemm.weight`, `gemm.bias` for `self.gemm = nn.Linear(...)`, `scale` for
    `self.scale = nn.Parameter(...)`, `mask` for `self.register_buffer("mask", ...)`."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return []
    init = next(
        (
            item
            for node in tree.body
            if isinstance(node, ast.ClassDef) and node.name == "Model"
            for item in node.body
            if isinstance(item, ast.FunctionDef) and item.name == "__init__"
        ),
        None,
    )
    if init is None:
        return []
    out: list[str] = []
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                persistent = next((k.value for k in node.keywords if k.arg == "persistent"), None)
                if not (isinstance(persistent, ast.Constant) and persistent.value is False):
                    out.append(node.args[0].value)
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if not isinstance(value, ast.Call):
            continue
        func = value.func
        kind = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        for target in targets:
            if not (
                isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
            ):
                continue
            name = target.attr
            if kind == "Parameter":
                out.append(name)
            elif kind in _MODULE_PARAMS:
                off = {k.arg for k in value.keywords if isinstance(k.value, ast.Constant) and k.value.value is False}
                params = _MODULE_PARAMS[kind]
                if off & {"elementwise_affine", "affine"}:
                    params = tuple(p for p in params if p not in ("weight", "bias"))
                if "bias" in off:
                    params = tuple(p for p in params if p != "bias")
                out += [f"{name}.{p}" for p in params]
            elif kind in _NO_PARAMS or not kind[:1].isupper():
                continue
            else:  # another module (nn.Sequential, a class of the file): its own names below it
                out.append(f"{name}.*")
    return list(dict.fromkeys(out))


def _constants_text(spec: Spec, params: dict) -> str:
    """`batch_size=16, features=64` — the module's numeric constants at one shape."""
    from kernelevolve.shapes import constants

    try:
        values = constants(spec.reference_source, dict(params))
    except SyntaxError:
        return shape_text(params)
    shown = [
        f"{k}={format_value(v)}"
        for k, v in values.items()
        if isinstance(v, (int, float, tuple, list)) and not isinstance(v, bool)
    ]
    return ", ".join(shown) or shape_text(params)


def _unique_params(spec: Spec, device: str, shapes: list[dict] | None) -> list[dict]:
    """The distinct shapes of the cases (a tuple and a list of the same numbers are one shape)."""
    seen: dict[str, dict] = {}
    for case in spec.cases(device, shapes):
        seen.setdefault(shape_text(case.params), case.params)
    return list(seen.values())


def shape_lines(spec: Spec, device: str, shapes: list[dict] | None) -> list[str]:
    """Which shapes are checked now and which are timed on the GPU, with the constants they set."""
    checked = _unique_params(spec, device, shapes)
    origin = (
        "given with --shape"
        if shapes
        else ("the spec's interpret_shapes" if device == "interpret" and spec.interpret_shapes else "the spec's shapes")
    )
    constants = " | ".join(_constants_text(spec, p) for p in checked)
    if device == "interpret":
        lines = [f"- checked now under the Triton interpreter on CPU, correctness only ({origin}): {constants}"]
        gpu = _unique_params(spec, "cuda", None)
        if [shape_text(p) for p in gpu] != [shape_text(p) for p in checked]:
            lines.append(
                f"- timed later on the GPU ({spec.hardware}, against {spec.baseline}), so tune for these: "
                + " | ".join(_constants_text(spec, p) for p in gpu)
                + "; write no size into the kernel: the same code runs at both"
            )
        else:
            lines.append(f"- timed later at the same shapes on the GPU ({spec.hardware}, against {spec.baseline})")
        lines.append("- on the GPU every check below is made again at the shapes timed there, before any timing")
        return lines
    return [f"- checked and timed on the GPU ({spec.hardware}, against {spec.baseline}; {origin}): {constants}"]


def _dtype_text(spec: Spec) -> str:
    parts = []
    for d in spec.dtypes:
        if d == "native":
            parts.append("native (inputs and parameters keep the dtypes get_inputs() and Model make)")
        else:
            parts.append(f"{d} (floating inputs and parameters cast to {d}; integer and bool inputs keep theirs)")
    return "; ".join(parts)


def _tolerance_text(spec: Spec) -> str:
    parts = []
    for d in spec.dtypes:
        tol = spec.tolerance(d)
        norm = getattr(tol, "norm_bound", None)
        norm_text = f", norm {norm:g}" if norm is not None else ""
        parts.append(f"{d}: atol {tol.atol:g}, rtol {tol.rtol:g}{norm_text}")
    return "; ".join(parts)


def evaluator_contract(spec: Spec, device: str, shapes: list[dict] | None = None, trials: int | None = None) -> str:
    """The checks a candidate meets, as short prompt lines, from the evaluator's own settings."""
    from kernelevolve.harness.runtime.correctness import REPEAT_CALLS, repeat_plan

    trials = evaluator_trials() if trials is None else trials
    lines = shape_lines(spec, device, shapes)
    lines.append(f"- dtypes: {_dtype_text(spec)}; outputs must have the reference's shapes and dtypes")
    state = reference_state(spec.reference_source)
    named = f" (here: {', '.join(state[:8])}{', ...' if len(state) > 8 else ''})" if state else ""
    lines.append(
        "- parameters: `ModelNew(*get_init_inputs())` is built, then every parameter and buffer whose name and "
        "shape match the reference's state_dict is copied from a reference whose floating parameters were "
        f"randomly perturbed{named} (buffers, a causal mask say, are copied as the reference made them): keep "
        "the reference's attribute names and read the values in forward; "
        "a value under another name keeps what your constructor gave it, and fails"
    )
    lines.append(
        f"- each of {trials} trials uses fresh random inputs from get_inputs() (new seed, contiguous) and a "
        "freshly perturbed reference"
    )
    if getattr(spec, "inplace", False):
        lines.append("- the spec's operator is in place: writing into the inputs is allowed")
    else:
        lines.append(
            "- inputs must be unchanged after forward (they are compared), and no output may be an input or a view of one"
        )
    lines.append(
        f"- while forward runs, {', '.join(POISONED)} return memory filled with NaN (integers: their maximum, "
        "bool: True): write every element of every output"
    )
    if repeat_plan(trials):
        lines.append(
            f"- then the same module is called {REPEAT_CALLS} more times on two input buffers whose values change "
            "between calls, and every output is checked: never cache a result by pointer, shape or call count"
        )
    allowed = list(getattr(spec, "allow_torch_ops", []) or [])
    glue = (
        "torch only as glue (allocation, views, reshapes, permutes, casts, copies, and questions about dtypes "
        "and shapes such as torch.result_type)"
    )
    lines.append(
        "- every call must do its computation in the kernels it launches; "
        + glue
        + (f"; also allowed for this spec: {', '.join(allowed)}" if allowed else "")
    )
    lines.append("- the reference runs in float64 (float32 where float64 cannot run) on the same parameters and inputs")
    lines.append(
        "- correct means, per output: every element |out - ref| <= atol + rtol*|ref| AND the whole output "
        "||out - ref||_2 <= norm*||ref||_2 (so an all-zero or constant output fails at any size); NaN/Inf where "
        f"the reference is finite fails; integer outputs must match exactly. Tolerances: {_tolerance_text(spec)}"
    )
    if getattr(spec, "tf32", False):
        lines.append(
            '- TF32 is allowed: float32 `tl.dot` may use input_precision="tf32" (the tolerance above allows it)'
        )
    else:
        lines.append(
            '- TF32 is not allowed: a float32 `tl.dot` must pass input_precision="ieee" (the default rounds '
            "its inputs to tf32 and misses the float32 tolerance); 16-bit inputs are unaffected"
        )
    lines.append("- forward returns plain torch.Tensor objects (no subclass, no nn.Parameter), as the reference does")
    if device != "interpret":
        lines.append(
            "- timed calls get fresh inputs in distinct buffers and their outputs are checked too; do all work on "
            "the current CUDA stream before forward returns"
        )
    return "\n".join(lines)
