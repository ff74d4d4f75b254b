"""Operator specs: what to compute, at which shapes and dtypes, on which hardware.

A spec is a YAML file in `specs/` (or, directly, a reference module in the KernelBench
convention). Loading never raises a traceback at the user: every problem becomes a `SpecError`
whose message names the file and the field.
"""

from __future__ import annotations

import ast
import hashlib
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelevolve import pysource
from kernelevolve import shapes as shapes_mod


FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")

# Elementwise |out - ref| <= atol + rtol * |ref|, and the output as a whole
# ||out - ref||_2 <= norm_rtol * ||ref||_2 (default norm_rtol = rtol), ref computed in float64.
DEFAULT_TOLERANCES: dict[str, dict[str, float]] = {
    "float64": {"atol": 1e-7, "rtol": 1e-7},
    "float32": {"atol": 1e-3, "rtol": 1e-3},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 2e-2, "rtol": 2e-2},
    "native": {"atol": 1e-3, "rtol": 1e-3},
}

# float32 outputs of TF32 matrix products (10-bit mantissa inputs, float32 accumulation).
TF32_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class SpecError(ValueError):
    """A spec that cannot be used; str() is one line naming the file and the field."""


class Tolerance(BaseModel):
    """Per dtype: every element within atol + rtol * |ref|, and the output as a whole within
    norm_rtol * ||ref|| (2-norms; default rtol), so that an output whose values all sit under atol
    (an all-zero softmax over a long row) still has to be right."""

    model_config = ConfigDict(extra="forbid")
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    norm_rtol: float | None = Field(default=None, gt=0)

    @property
    def norm_bound(self) -> float:
        return self.norm_rtol if self.norm_rtol is not None else max(self.rtol, 1e-6)


class Budget(BaseModel):
    """When a search stops: the spec's `budget:` (where the node count is `nodes`), with a run's
    options on top (`with_overrides`), saved with the run; kernelevolve.search.termination applies it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    max_nodes: int = Field(default=20, ge=1, validation_alias=AliasChoices("nodes", "max_nodes"))
    wall_clock_s: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)
    stall: int | None = Field(default=None, ge=1)  # stop after this many evaluated nodes without a new best
    target_fitness: float | None = Field(default=None, gt=0)  # a real (timed) fitness; never met on the interpreter

    @property
    def nodes(self) -> int:
        return self.max_nodes

    def with_overrides(self, **overrides) -> "Budget":
        """A copy with the non-None overrides (command-line options) on top, validated."""
        return Budget.model_validate({**self.model_dump(), **{k: v for k, v in overrides.items() if v is not None}})


# A constant's new value: a number, a flag, a string, or a tuple/list of numbers (`input_shape=(64,)`).
ShapeValue = bool | int | float | str | tuple[int | float, ...] | list[int | float]


def format_value(value: ShapeValue) -> str:
    """`64`, `(64,)`, `(64, 128)`: tuples and lists read the same (JSON turns one into the other)."""
    if isinstance(value, (list, tuple)):
        return f"({value[0]},)" if len(value) == 1 else "(" + ", ".join(map(str, value)) + ")"
    return str(value)


def shape_text(shape: dict[str, ShapeValue]) -> str:
    """`M=4096,N=512`; `default` for the module's own constants."""
    return ",".join(f"{k}={format_value(v)}" for k, v in shape.items()) or "default"


class Case(BaseModel):
    """One evaluation point: a shape (constant overrides) at one dtype."""

    params: dict[str, ShapeValue]
    dtype: str  # a torch dtype name, or "native" to keep the module's own dtypes

    @property
    def label(self) -> str:
        return f"{shape_text(self.params)} {self.dtype}"


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    family: str = ""
    reference: Path
    shapes: list[dict[str, ShapeValue]] = Field(default_factory=lambda: [{}])
    # Small shapes for the Triton interpreter on CPU, used there when no --shape is given.
    interpret_shapes: list[dict[str, ShapeValue]] | None = None
    dtypes: list[str] = Field(default_factory=lambda: ["native"])
    tolerances: dict[str, Tolerance] = Field(default_factory=dict)
    baseline: Literal["eager", "torch.compile"] = "torch.compile"
    hardware: str = "h200"
    tags: list[str] = Field(default_factory=list)
    kernel: str | None = None  # knowledge_base/kernels/<kernel>.py; defaults to `name`
    budget: Budget = Field(default_factory=Budget)
    # Python expressions over the shape constants (and `e`, the element size in bytes) giving
    # the fewest bytes moved and the FLOPs per call; used to report GB/s and TFLOP/s.
    bytes: str | None = None
    flops: str | None = None
    # Torch ops a candidate may compute with besides its kernels (by name, e.g. [pad, softmax]);
    # others are glue only (allocation, views, casts). `inplace`: the operator writes its inputs.
    allow_torch_ops: list[str] = Field(default_factory=list)
    inplace: bool = False
    # Kernel languages candidates may be written in (kernelevolve/languages.py): triton, cute.
    languages: list[str] = Field(default_factory=lambda: ["triton"])
    # TF32 for float32 matrix products: false (default) means float32 `tl.dot`s must use
    # input_precision="ieee"; the interpreter rounds tf32 dots' inputs as the GPU does, so a kernel
    # that relies on tf32 fails on the CPU as it would on the GPU. true: tf32 dots are allowed and the
    # float32 tolerance defaults to TF32_TOLERANCE.
    tf32: bool = False
    path: Path | None = None  # the spec file itself (None for a bare reference module)

    @field_validator("dtypes")
    @classmethod
    def _known_dtypes(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("needs at least one dtype")
        for d in v:
            if d not in FLOAT_DTYPES and d != "native":
                raise ValueError(f"unknown dtype {d!r} (use one of {', '.join(FLOAT_DTYPES)}, native)")
        return v

    @field_validator("languages")
    @classmethod
    def _known_languages(cls, v: list[str]) -> list[str]:
        from kernelevolve.languages import check_names

        return check_names(v)

    @field_validator("shapes")
    @classmethod
    def _some_shapes(cls, v: list[dict]) -> list[dict]:
        if not v:
            raise ValueError("needs at least one shape")
        return v

    @field_validator("bytes", "flops")
    @classmethod
    def _expression(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                pysource.parse(v, mode="eval")
            except SyntaxError as e:
                raise ValueError(f"not a Python expression: {e.msg}") from None
        return v

    # -- derived -------------------------------------------------------------------------
    @property
    def kernel_name(self) -> str:
        return self.kernel or self.name

    @property
    def reference_source(self) -> str:
        return self.reference.read_text()

    @property
    def fingerprint(self) -> str:
        """Identifies what the baseline computes: the reference source and the spec name."""
        h = hashlib.sha256(self.reference_source.encode())
        h.update(self.name.encode())
        return h.hexdigest()[:16]

    def tolerance(self, dtype: str) -> Tolerance:
        if dtype in self.tolerances:
            return self.tolerances[dtype]
        if self.tf32 and dtype in ("float32", "native"):
            return Tolerance(**TF32_TOLERANCE)
        return Tolerance(**DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["native"]))

    def cases(self, device: str = "cuda", shapes: list[dict[str, ShapeValue]] | None = None) -> list[Case]:
        """Shapes x dtypes. `shapes` (from --shape) replaces the spec's own."""
        if shapes:
            chosen = shapes
        elif device == "interpret" and self.interpret_shapes:
            chosen = self.interpret_shapes
        else:
            chosen = self.shapes
        return [Case(params=dict(s), dtype=d) for s in chosen for d in self.dtypes]

    def roofline(self, case: Case) -> tuple[float | None, float | None]:
        """(bytes, flops) for one case, from the spec's expressions; None where not given."""
        scope: dict[str, Any] = {"e": _element_size(case.dtype), "math": math}
        scope.update(shapes_mod.constants(self.reference_source, case.params))
        out = []
        for expr in (self.bytes, self.flops):
            try:
                out.append(float(eval(expr, {"__builtins__": {}}, scope)) if expr else None)  # noqa: S307 - spec is trusted config
            except Exception:
                out.append(None)
        return out[0], out[1]

    def check_shape(self, shape: dict[str, ShapeValue], where: str = "--shape") -> None:
        """SpecError unless every name is a module-level constant of the reference and its value
        is of the kind the module uses (see kernelevolve/shapes.py, shared with the harness)."""
        try:
            shapes_mod.check(shape, self.reference_source, self.reference.name, where)
        except shapes_mod.ShapeError as e:
            raise SpecError(str(e)) from None

    def _module_constants(self) -> dict[str, Any]:
        """Module-level constants of the reference (parsed, never executed)."""
        return shapes_mod.constants(self.reference_source)


def _element_size(dtype: str) -> int:
    return {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}.get(dtype, 4)


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_spec(path: str | Path) -> Spec:
    """Load a YAML spec, or a KernelBench-style reference module used directly as a spec (a
    relative path not found here may name a bundled spec: kernelevolve.paths.find)."""
    from kernelevolve.paths import find

    path = find(path)
    if not path.exists():
        raise SpecError(f"{path}: no such file")
    if path.suffix == ".py":
        return _spec_from_module(path)
    if path.suffix not in (".yaml", ".yml"):
        raise SpecError(f"{path}: a spec is a .yaml file or a reference module (.py)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise SpecError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: a spec is a YAML mapping with at least `name` and `reference`")
    raw.setdefault("name", path.stem)
    if "reference" not in raw:
        raise SpecError(f"{path}: field `reference`: missing (path of the reference module)")
    ref = Path(str(raw["reference"]))
    raw["reference"] = ref if ref.is_absolute() else (path.parent / ref).resolve()
    raw["path"] = path.resolve()
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        hint = ""
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:  # a mistyped field name
            hint = shapes_mod.did_you_mean(str(err["loc"][0]), [f for f in Spec.model_fields if f != "path"])
        elif err["type"] == "extra_forbidden" and err["loc"][0] == "budget":
            hint = shapes_mod.did_you_mean(str(err["loc"][-1]), Budget.model_fields)
        raise SpecError(f"{path}: field `{_field_path(err['loc'])}`: {err['msg']}{hint}{more}") from None
    _check_reference(spec.reference, f"{path}: field `reference`")
    for field_name in ("shapes", "interpret_shapes"):
        for i, shape in enumerate(getattr(spec, field_name) or []):
            spec.check_shape(shape, where=f"{path}: field `{field_name}[{i}]`")
    return spec


def _spec_from_module(path: Path) -> Spec:
    _check_reference(path.resolve(), str(path))
    return Spec(
        name=path.stem.replace(" ", "_"), reference=path.resolve(), description=f"KernelBench-style module {path.name}"
    )


def _check_reference(ref: Path, where: str) -> None:
    if not ref.exists():
        raise SpecError(f"{where}: {ref} does not exist")
    try:
        tree = pysource.parse(ref.read_text(), filename=str(ref))
    except SyntaxError as e:
        raise SpecError(f"{where}: {ref.name} line {e.lineno}: {e.msg}") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for needed in ("Model", "get_inputs", "get_init_inputs"):
        if needed not in names:
            raise SpecError(f"{where}: {ref.name} defines no `{needed}` (KernelBench convention)")


def parse_shape_option(text: str) -> dict[str, ShapeValue]:
    """`M=4096,N=512` -> {"M": 4096, "N": 512}; values are Python literals or constant
    expressions (`N=2048*2`), tuples as `input_shape=(64,)` or `input_shape=64,`; else strings.
    A value that is none of a number, flag, string or tuple of numbers is a SpecError."""
    try:
        out = shapes_mod.parse_option(text)
    except shapes_mod.ShapeError as e:
        raise SpecError(str(e)) from None
    for name, value in out.items():
        ok = isinstance(value, (int, float, str)) or (
            isinstance(value, (list, tuple))
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
        )
        if not ok:
            raise SpecError(
                f"--shape {text!r}: {name}: a number, True/False, a string or a tuple of numbers, not {value!r}"
            )
    return out
