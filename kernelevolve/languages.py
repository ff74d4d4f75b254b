"""Kernel languages a candidate may be written in: Triton (the default) and CuTe DSL.

What this module knows per language: the module names a candidate imports to use it, how the
knowledge base marks its documents, whether the CPU interpreter can run it, and what a prompt
tells the model about it. `detect` reads a candidate's language from its imports (the source is
parsed, never run); `gate` is the evaluator's first look at a candidate: a language the spec does
not allow is refused (`not_a_kernel`), and a CuTe DSL candidate under the CPU interpreter gets the
`needs_gpu` verdict (not run, not a fault of the kernel).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelevolve.records.result import Failure


@dataclass(frozen=True)
class Language:
    name: str
    title: str  # how people and prompts name it
    imports: tuple[str, ...]  # top-level modules whose import means a candidate uses it
    interpretable: bool  # can run under --device interpret (the CPU)
    prompt: str  # the contract's line about writing kernels in it


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
}
DEFAULT = ("triton",)


def names() -> tuple[str, ...]:
    return tuple(LANGUAGES)


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


def detect(source: str) -> Detection:
    """The kernel languages `source` imports (a syntax error: none found; the evaluator reports it)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return Detection(())
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module.split(".")[0])
    return Detection(tuple(n for n, lang in LANGUAGES.items() if modules & set(lang.imports)))


@dataclass(frozen=True)
class Gate:
    """The evaluator's language verdict: `failure` None lets the candidate through."""

    language: str  # Detection.label
    failure: Failure | None = None
    message: str = ""


def gate(source: str, allowed: list[str] | tuple[str, ...], device: str) -> Gate:
    """Refuse a candidate written in a language the spec does not allow; give a CuTe DSL candidate
    under the CPU interpreter the `needs_gpu` verdict. A source importing no kernel language goes on:
    the harness then sees whether it launches a kernel at all (it may use a knowledge-base helper)."""
    found = detect(source)
    refused = [n for n in found.found if n not in allowed]
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
