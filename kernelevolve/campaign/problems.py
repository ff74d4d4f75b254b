"""The problems of a suite: found from paths, directories and globs; their shapes; their solution files."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelevolve.campaign.scaling import scaled_shape
from kernelevolve.spec import Spec, SpecError, load_spec, parse_shape_option, shape_text


class ProblemError(ValueError):
    """Paths, shapes or solutions that do not make a suite; one line."""


@dataclass
class Problem:
    spec: Spec
    path: Path
    shapes: list[dict[str, Any]] | None = None  # None: the spec's own for the device
    shape_rule: str = ""
    solution: Path | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def shapes_text(self, device: str) -> str:
        """The shapes evaluated on `device`, `M=4,N=256; M=3,N=1000`."""
        seen: list[str] = []
        for case in self.spec.cases(device, self.shapes):
            if shape_text(case.params) not in seen:
                seen.append(shape_text(case.params))
        return "; ".join(seen)


def find_problem_files(paths: list[str]) -> list[Path]:
    """Spec YAMLs and KernelBench-style modules named by files, directories (their top level; a
    module that a YAML there uses as its reference is that YAML's, not a problem of its own) and
    globs, in the order given, each once."""
    out: list[Path] = []
    for text in paths:
        if any(c in text for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(text))
            if not found:
                raise ProblemError(f"{text}: the pattern matches no file")
            out += [p for p in found if p.suffix in (".py", ".yaml", ".yml") and not p.name.startswith("_")]
        elif Path(text).is_dir():
            out += _directory(Path(text))
        elif Path(text).is_file():
            out.append(Path(text))
        else:
            raise ProblemError(f"{text}: no such file, directory or matching pattern")
    seen, unique = set(), []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    if not unique:
        raise ProblemError(f"{' '.join(paths)}: no spec (.yaml) or problem file (.py) there")
    return unique


def _directory(folder: Path) -> list[Path]:
    yamls = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
    references = set()
    for y in yamls:
        try:
            references.add(load_spec(y).reference.resolve())
        except SpecError:
            pass  # reported when the problems are loaded
    modules = [p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_") and p.resolve() not in references]
    return sorted([*yamls, *modules], key=lambda p: p.name)


def load_problems(paths: list[str]) -> list[Problem]:
    problems: list[Problem] = []
    names: dict[str, Path] = {}
    for path in find_problem_files(paths):
        try:
            spec = load_spec(path)
        except SpecError as e:
            raise ProblemError(str(e)) from None
        if spec.name in names:
            raise ProblemError(f"two problems are named {spec.name!r}: {names[spec.name]} and {path}")
        names[spec.name] = path
        problems.append(Problem(spec=spec, path=path.resolve()))
    return problems


def parse_problem_shapes(options: list[str] | None, problems: list[Problem]) -> dict[str, list[dict[str, Any]]]:
    """`--shape PROBLEM:NAME=VALUE[,...]` (repeat for several shapes of one problem)."""
    by_name = {p.name: p for p in problems}
    out: dict[str, list[dict[str, Any]]] = {}
    for text in options or []:
        name, sep, rest = text.partition(":")
        if not sep or not rest:
            raise ProblemError(f"--shape {text!r}: a suite's shapes name their problem: PROBLEM:NAME=VALUE[,...]")
        if name not in by_name:
            raise ProblemError(f"--shape {text!r}: no problem named {name!r} (problems: {', '.join(by_name)})")
        try:
            shape = parse_shape_option(rest)
            by_name[name].spec.check_shape(shape, where=f"--shape {text!r}")
        except SpecError as e:
            raise ProblemError(str(e)) from None
        out.setdefault(name, []).append(shape)
    return out


def choose_shapes(problem: Problem, device: str, overrides: list[dict[str, Any]] | None) -> None:
    """Set the problem's shapes and say where they came from: --shape, the spec's interpreter
    shapes, the scaling rule (kernelevolve/campaign/scaling.py) for a big module on the
    interpreter, or the spec's / module's own."""
    spec = problem.spec
    if overrides:
        problem.shapes, problem.shape_rule = overrides, "--shape"
    elif device != "interpret":
        problem.shape_rule = "the spec's shapes" if spec.path is not None else "the module's constants"
    elif spec.interpret_shapes:
        problem.shape_rule = "the spec's interpret_shapes"
    elif spec.path is not None and spec.shapes != [{}]:
        problem.shape_rule = "the spec's shapes (it has no interpret_shapes)"
    else:
        scaled = scaled_shape(spec.reference_source)
        if scaled:
            problem.shapes, problem.shape_rule = [scaled], "scaled for the interpreter"
        else:
            problem.shape_rule = "the module's constants (small already)"


def match_solutions(problems: list[Problem], folder: Path) -> None:
    """Each problem's solution: the .py file in `folder` named as the problem (or as the spec's
    reference kernel, `kernel:`), case-insensitively; None when there is none."""
    if not folder.is_dir():
        raise ProblemError(f"--solutions {folder}: no such directory")
    files = {p.stem.lower(): p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")}
    for problem in problems:
        problem.solution = files.get(problem.name.lower()) or files.get(problem.spec.kernel_name.lower())
