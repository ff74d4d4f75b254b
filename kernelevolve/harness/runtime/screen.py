"""A static look at a candidate for tampering with its own evaluation (stdlib only).

Run by the evaluator before a process is started: patching torch/triton/the harness, reaching
frames, globals or builtins, dynamic imports, killing or forking processes. Legitimate kernels
need none of these; the OS sandbox contains what slips past, the tripwire catches patches made
at run time.
"""

from __future__ import annotations

import ast

from kernelevolve import pysource

# ------------------------------------------------------------------------
ALLOWED_IMPORTS = {
    "torch",
    "triton",
    "math",
    "functools",
    "itertools",
    "operator",
    "typing",
    "dataclasses",
    "collections",
    "enum",
    "abc",
    "numbers",
    "os",
    "warnings",
    "__future__",
    # CuTe DSL (nvidia-cutlass-dsl) and the CUDA stream type its host functions take; the evaluator's
    # language check (kernelevolve/languages.py) has already refused them where the spec allows only Triton.
    "cutlass",
    "cuda",
}
FORBIDDEN_CALLS = {
    "eval",
    "exec",
    "compile",
    "__import__",
    "globals",
    "locals",
    "vars",
    "open",
    "breakpoint",
    "setattr",
    "delattr",
    "exit",
    "quit",
    "input",
}
ALLOWED_DUNDERS = {
    "__init__",
    "__name__",
    "__qualname__",
    "__doc__",
    "__class__",
    "__len__",
    "__getitem__",
    "__call__",
    "__repr__",
    "__future__",
}
FORBIDDEN_OS = {
    "kill",
    "killpg",
    "fork",
    "forkpty",
    "system",
    "popen",
    "_exit",
    "abort",
    "setsid",
    "setpgid",
    "remove",
    "unlink",
    "rmdir",
    "rename",
    "replace",
    "chmod",
    "chown",
    "symlink",
    "link",
    "open",
    "write",
    "dup",
    "dup2",
    "putenv",
    "unsetenv",
    "pidfd_open",
    "getppid",
    "nice",
    "sched_setaffinity",
}
FORBIDDEN_ATTRS = {
    "_getframe",
    "f_back",
    "f_globals",
    "f_locals",
    "gi_frame",
    "cr_frame",
    "tb_frame",
    "modules",
    "_C",
    "_dynamo",
    "_ops",
    "ops",
    "_inductor",
    "_refs",
    "_prims",
    "ctypes",
    "_disable_torch_function",
    "DisableTorchFunction",
    "DisableTorchFunctionSubclass",
}


def kernel_helpers(knowledge_base=None) -> set[str]:
    """The knowledge base's shared kernel modules, found by convention: kernels/_*.py (the evaluator puts
    that folder on every candidate's import path). `knowledge_base`: the run's; None: the process's."""
    from pathlib import Path

    from kernelevolve.paths import knowledge_base as process_knowledge_base

    root = Path(knowledge_base) if knowledge_base is not None else process_knowledge_base()
    return {path.stem for path in (root / "kernels").glob("_*.py") if path.stem.isidentifier()}


def screen_source(source: str, knowledge_base=None) -> list[str]:
    """Lines of the candidate that tamper with the evaluation, as 'line N: what' (empty if none);
    imports of `knowledge_base`'s kernel helpers are allowed (None: the process's knowledge base)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return []  # the syntax check reports it
    allowed = ALLOWED_IMPORTS | kernel_helpers(knowledge_base)
    problems: list[str] = []
    modules: set[str] = set()

    def flag(node: ast.AST, what: str) -> None:
        problems.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] not in allowed or node.__class__ is ast.ImportFrom and node.level:
                    flag(
                        node,
                        f"imports {name or '.'} (a kernel may import: {', '.join(sorted(allowed - {'__future__'}))})",
                    )
            for alias in node.names:
                modules.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            flag(node, f"calls {node.func.id}()")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
                flag(node, "getattr with a computed name")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
                flag(node, f"reaches {node.attr}")
            elif node.attr in FORBIDDEN_ATTRS:
                flag(node, f"reaches .{node.attr}")
            elif isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in FORBIDDEN_OS:
                flag(node, f"calls os.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
            flag(node, f"reaches {node.id}")
    # Assigning to an attribute of an imported module (torch.x = ..., torch.cuda.Event.y = ...).
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else node.targets
            if isinstance(node, ast.Delete)
            else []
        )
        for t in targets:
            root = t
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if t is not root and isinstance(root, ast.Name) and root.id in modules:
                flag(node, f"assigns to {ast.unparse(t)} (patches module {root.id})")
    return sorted(
        set(problems), key=lambda p: int(p.split()[1].rstrip(":")) if p.split()[1].rstrip(":").isdigit() else 0
    )
