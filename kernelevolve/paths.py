"""Where the project's file-based parts live: harness templates, the knowledge base, the specs.

In a checkout (an editable install, the tests) they are the repository's own folders; an installed
wheel carries copies inside the package (kernelevolve/bundled/, put there by setup.py), found
through importlib.resources. A user's own knowledge base comes from --kb or KERNELEVOLVE_KB.

The knowledge base here is the process's default: what `kernelevolve --kb DIR` (or the environment)
names for the command, read by commands that are not a run (eval, kb, export) and by what is read
once per process (hardware peaks). A run carries its own (kernelevolve.runs.RunConfig.knowledge_base)
and hands it to its evaluator, profiler, operator and workers: nothing here is switched for a run.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from kernelevolve import pysource

PACKAGE = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE.parent  # a checkout's root; in a wheel, site-packages (use DATA_ROOT)
_BUNDLED = Path(str(resources.files("kernelevolve").joinpath("bundled")))
DATA_ROOT = _BUNDLED if _BUNDLED.is_dir() else REPO_ROOT
HARNESS_TEMPLATES = DATA_ROOT / "harness_templates"
BUNDLED_KNOWLEDGE_BASE = DATA_ROOT / "knowledge_base"
SPECS = DATA_ROOT / "specs"

_knowledge_base: Path | None = None  # --kb, for this process


def use_knowledge_base(path: str | Path | None) -> None:
    """--kb before the command (cli/app.py), or a Ray worker serving one run: this process's default
    knowledge base is `path` (None: back to $KERNELEVOLVE_KB, else the bundled one)."""
    global _knowledge_base
    _knowledge_base = None if path is None else Path(path).expanduser().resolve()


def knowledge_base() -> Path:
    """--kb, else $KERNELEVOLVE_KB, else the bundled knowledge base."""
    return users_knowledge_base() or BUNDLED_KNOWLEDGE_BASE


def users_knowledge_base() -> Path | None:
    """--kb, else $KERNELEVOLVE_KB, else None (saved with a run, so that its resume reads the same)."""
    from kernelevolve.settings import settings

    return _knowledge_base or (settings().kb.expanduser().resolve() if settings().kb else None)


def __getattr__(name: str) -> Path:
    # Kept for the public name `paths.KNOWLEDGE_BASE` (tests, benchmarks, plugins): the process's
    # knowledge_base(), read when asked. Code in the package calls knowledge_base() or takes a run's.
    if name == "KNOWLEDGE_BASE":
        return knowledge_base()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def find(path: str | Path) -> Path:
    """`path` as given; a relative one that is not there is looked for among the bundled files, so
    the README's `specs/softmax.yaml` and `knowledge_base/kernels/softmax.py` work from any directory."""
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    bundled = DATA_ROOT / path
    return bundled if bundled.exists() else path


def cache_dir() -> Path:
    """Per-user cache; KERNELEVOLVE_CACHE_DIR overrides."""
    import os

    from kernelevolve.settings import settings

    base = (
        settings().cache_dir or Path(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))) / "kernelevolve"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def kernel_helpers(source: str) -> list[Path]:
    """The knowledge base's shared kernel modules (knowledge_base/kernels/_launch_heuristics.py...)
    that `source` imports, and the ones they import: what an exported kernel must carry along."""
    import ast

    folder = knowledge_base() / "kernels"  # where the evaluator let the kernel import from
    found: dict[str, Path] = {}
    todo = [source]
    while todo:
        for stmt in ast.walk(pysource.parse(todo.pop())):
            if isinstance(stmt, ast.Import):
                names = [a.name for a in stmt.names]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                names = [stmt.module]
            else:
                continue
            for name in names:
                path = folder / f"{name.split('.')[0]}.py"
                if path.name not in found and path.is_file():
                    found[path.name] = path
                    todo.append(path.read_text())
    return list(found.values())
