"""Kernel languages a candidate may be written in: Triton (the default), Gluon and CuTe DSL.

What this module knows per language: the modules a candidate imports to use it, how the
knowledge base marks its documents, whether the CPU interpreter can run it, which language's spec
entry also allows it, and what a prompt tells the model about it. `detect` reads a candidate's
language from its imports and its functions' decorators (the source is parsed, never run); `gate` is
the evaluator's first look at a candidate: a language the spec does not allow is refused
(`not_a_kernel`), and a candidate in a language the CPU interpreter cannot run (CuTe DSL, Gluon) gets
the `needs_gpu` verdict there (not run, not a fault of the kernel).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelevolve import pysource
from kernelevolve.records.result import Failure


@dataclass(frozen=True)
class Language:
    name: str
    title: str  # how people and prompts name it
    # Modules (dotted; their submodules too) whose import, or a decorator from which, means a candidate
    # uses it. A module of two languages belongs to the one naming it most closely: triton.experimental.gluon
    # is Gluon's, triton.language Triton's.
    imports: tuple[str, ...]
    interpretable: bool  # can run under --device interpret (the CPU)
    prompt: str  # the contract's line about writing kernels in it
    # A language whose entry in a spec's `languages` allows this one too: Gluon ships inside Triton, is
    # launched by Triton's runtime and was accepted wherever Triton was before it had a name of its own.
    part_of: str | None = None


LANGUAGES: dict[str, Language] = {
    "triton": Language(
        name="triton",
        title="Triton",
        imports=("triton",),
        interpretable=True,
        prompt="Triton: `import triton`, `import triton.language as tl`, kernels decorated with `@triton.jit` "
        "and launched from `forward` as `kernel[grid](...)`",
    ),
    "cute": Language(
        name="cute",
        title="CuTe DSL",
        imports=("cutlass",),
        interpretable=False,
        prompt="CuTe DSL (the nvidia-cutlass-dsl package): `import cutlass`, `import cutlass.cute as cute`, "
        "`from cutlass.cute.runtime import from_dlpack`; device code in a `@cute.kernel`, launched from a "
        "`@cute.jit` host function that `forward` compiles once per shape and dtype with `cute.compile` "
        "(keep the compiled function in a dict on the module) and then calls with the tensors and the caller's "
        "stream, `cuda.CUstream(torch.cuda.current_stream().cuda_stream)` (`import cuda.bindings.driver as cuda`)",
    ),
    "gluon": Language(
        name="gluon",
        title="Gluon",
        imports=("triton.experimental.gluon",),
        interpretable=False,
        prompt="Gluon (Triton's lower-level language, GPU only): `from triton.experimental import gluon`, "
        "`from triton.experimental.gluon import language as gl`; kernels decorated with `@gluon.jit`, every "
        "tensor's layout explicit (`gl.BlockedLayout`, `gl.NVMMASharedLayout`, ...), the target's own "
        "operations from `triton.experimental.gluon.language.nvidia.hopper` (tma, mbarrier, warpgroup_mma), "
        "launched from `forward` as `kernel[grid](...)`",
        part_of="triton",
    ),
}
DEFAULT = ("triton",)


def names() -> tuple[str, ...]:
    return tuple(LANGUAGES)


def allows(allowed: list[str] | tuple[str, ...], name: str) -> bool:
    """Whether a spec whose `languages` are `allowed` accepts a candidate in language `name` (itself, or
    the language it is part of: Gluon where Triton is allowed)."""
    return name in allowed or LANGUAGES[name].part_of in allowed


def check_names(values: list[str]) -> list[str]:
    """The spec's `languages:` list, validated: ValueError with a one-line message otherwise."""
    if not values:
        raise ValueError(f"needs at least one language (of: {', '.join(LANGUAGES)})")
    for v in values:
        if v not in LANGUAGES:
            raise ValueError(f"unknown language {v!r} (use one of: {', '.join(LANGUAGES)})")
    return list(dict.fromkeys(values))


@dataclass(frozen=True)
class Detection:
    """The languages a source imports. `language` is the one language when exactly one is found."""

    found: tuple[str, ...]

    @property
    def language(self) -> str | None:
        return self.found[0] if len(self.found) == 1 else None

    @property
    def label(self) -> str:
        """What is stored and shown: `triton`, `cute`, `triton+cute` (mixed) or `none`."""
        return "+".join(self.found) or "none"

    def describe(self) -> str:
        if not self.found:
            return (
                "imports no kernel language ("
                + ", ".join(f"{lang.title}: {lang.imports[0]}" for lang in LANGUAGES.values())
                + ")"
            )
        if len(self.found) > 1:
            return "imports several kernel languages (" + ", ".join(LANGUAGES[n].title for n in self.found) + ")"
        return f"written in {LANGUAGES[self.found[0]].title}"


def _owner(module: str) -> tuple[str, str] | None:
    """(language, its module) for the language naming `module` most closely, or None."""
    best = None
    for lang in LANGUAGES.values():
        for prefix in lang.imports:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (lang.name, prefix)
    return best


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a name or an attribute chain (a decorator's call stripped), else None."""
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _used_modules(tree: ast.AST) -> set[str]:
    """The dotted names a source imports (`from a import b`: a and a.b) and its functions' decorators,
    spelled through those imports (`@gluon.jit` after `from triton.experimental import gluon`:
    triton.experimental.gluon.jit). Relative imports are not a language's."""
    names: set[str] = set()
    bound: dict[str, str] = {}  # local name -> what it was imported as
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names.add(a.name)
                local = a.asname or a.name.split(".")[0]
                bound[local] = a.name if a.asname else local
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            for a in node.names:
                if a.name != "*":
                    names.add(f"{node.module}.{a.name}")
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                name = _dotted(decorator)
                head = name.split(".")[0] if name else None
                if head in bound:
                    names.add(bound[head] + name[len(head) :])
    return names


def detect(source: str) -> Detection:
    """The kernel languages `source` uses (a syntax error: none found; the evaluator reports it): those owning
    a module it imports or a decorator it applies. A package that only holds another language's module
    found in the source is not evidence of its own: `import triton` (for triton.cdiv) beside
    `from triton.experimental import gluon` is Gluon alone; a `@triton.jit` kernel or triton.language
    beside them makes it Triton and Gluon."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return Detection(())
    owned = [(owner, module) for module in _used_modules(tree) if (owner := _owner(module))]
    found_prefixes = {prefix for (_, prefix), _ in owned}
    found = {
        lang
        for (lang, _), module in owned
        if not any(p != module and p.startswith(module + ".") for p in found_prefixes)  # a mere parent package
    }
    return Detection(tuple(n for n in LANGUAGES if n in found))


@dataclass(frozen=True)
class Gate:
    """The evaluator's language verdict: `failure` None lets the candidate through."""

    language: str  # Detection.label
    failure: Failure | None = None
    message: str = ""


def gate(source: str, allowed: list[str] | tuple[str, ...], device: str) -> Gate:
    """Refuse a candidate written in a language the spec does not allow; give a candidate in a language
    the CPU interpreter cannot run (CuTe DSL, Gluon) the `needs_gpu` verdict under it. A source importing no kernel language goes on:
    the harness then sees whether it launches a kernel at all (it may use a knowledge-base helper)."""
    found = detect(source)
    refused = [n for n in found.found if not allows(allowed, n)]
    if refused:
        return Gate(
            found.label,
            Failure.NOT_A_KERNEL,
            f"the candidate is written in {' and '.join(LANGUAGES[n].title for n in refused)} "
            f"(it imports {', '.join(LANGUAGES[n].imports[0] for n in refused)}), which the spec does not allow: "
            f"its `languages` field allows {', '.join(LANGUAGES[n].title for n in allowed)}",
        )
    if device == "interpret":
        gpu_only = [n for n in found.found if not LANGUAGES[n].interpretable]
        if gpu_only:
            return Gate(
                found.label,
                Failure.NEEDS_GPU,
                f"needs a GPU: {' and '.join(LANGUAGES[n].title for n in gpu_only)} kernels cannot run under the CPU "
                "interpreter, so the candidate was not run (not a fault of the kernel); evaluate it with --device cuda",
            )
    return Gate(found.label)


def of_document(doc) -> str:
    """The language a knowledge-base document is about: its front matter's `language:` (default Triton,
    which every document without the key was written for)."""
    return str(doc.extra.get("language", "triton")).lower()


def prompt_lines(allowed: list[str] | tuple[str, ...], device: str) -> list[str]:
    """What the output contract says about languages when a spec allows more than Triton."""
    if list(allowed) == ["triton"]:
        return []
    lines = [
        "Write the kernels in ONE of these languages (the spec's `languages`), one language per module: "
        + "; ".join(LANGUAGES[n].prompt for n in allowed)
        + "."
    ]
    gpu_only = [LANGUAGES[n].title for n in allowed if not LANGUAGES[n].interpretable]
    if device == "interpret" and gpu_only:
        lines.append(
            f"This search runs under the CPU interpreter, where {' and '.join(gpu_only)} candidates cannot run "
            "(they are recorded as needing a GPU, unchecked): write Triton for it to be checked."
        )
    return lines
