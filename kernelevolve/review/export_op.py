"""`kernelevolve export RUN NODE -o DIR --as-op NAMESPACE::NAME`: a node's kernel as a PyTorch
custom op, in a folder of plain modules (no package to install):

    NAME_kernel.py     the node's source with its provenance header (as `export` writes it)
    NAME_reference.py  the spec's reference module
    NAME_op.py         torch.library registration, fake implementation, a drop-in nn.Module
    NAME_test.py       pytest: the op against the reference at the spec's shapes, and torch.compile
    NAME_bench.py      GPU timing against the spec's baseline, compared with the recorded speedups
    NAME_export.json   what the test and benchmark read: cases, tolerances, the recorded numbers

The op's signature comes from the reference (trusted spec code), run once at a small shape on the
CPU: the forward's inputs, its state_dict tensors, its outputs. The candidate's code is never run here.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from kernelevolve import pysource
from kernelevolve.review import ReviewError, export, verdicts

OP_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")
WARMUP_MS, REP_MS = 25.0, 100.0  # the evaluator's defaults (kernelevolve/evaluation/evaluator.py)


def exportable(repo, run_id: str, node_id: int, allow_unreviewed: bool = False):
    """(the run's graph, the node's source with its provenance header) for a node that may be
    exported: approved (or `allow_unreviewed`) and not held by a mark nobody approved; else ReviewError."""
    graph = repo.load_graph(run_id)
    node = graph[node_id] if node_id in graph else None
    if node is not None and node.held and not allow_unreviewed:  # marked suspicious/unstable, not approved
        raise ReviewError(
            f"node {node_id} of run {run_id} is marked {', '.join(node.evaluation.marks)} and nobody "
            f"approved it: review it first, or export anyway with --unreviewed"
        )
    return graph, export(repo, run_id, node_id, allow_unreviewed=allow_unreviewed)


def export_tritonbench(repo, run_id: str, node_id: int, out_dir: Path, allow_unreviewed: bool = False) -> Path:
    """A TritonBench operator package (kernelevolve.harness.tritonbench) for an exportable node, at the
    run's shapes; returns its operator.py."""
    from kernelevolve.harness.tritonbench import write_operator
    from kernelevolve.runs import RunSettings

    _, header_and_source = exportable(repo, run_id, node_id, allow_unreviewed)
    run = repo.run(run_id)
    return write_operator(
        _spec_of(run), header_and_source, Path(out_dir), shapes=RunSettings.model_validate(run.settings).shapes
    )


def parse_op_name(qualname: str) -> tuple[str, str]:
    m = OP_NAME.match(qualname or "")
    if not m:
        raise ReviewError(f"--as-op {qualname!r}: give NAMESPACE::NAME, both Python identifiers (e.g. mylib::rmsnorm)")
    return m[1], m[2]


def export_package(
    repo, run_id: str, node_id: int, out_dir: Path, qualname: str, allow_unreviewed: bool = False
) -> list[Path]:
    """Write the op folder; ReviewError (one line) for a node that may not or cannot be exported."""
    namespace, name = parse_op_name(qualname)
    graph, header_and_source = exportable(repo, run_id, node_id, allow_unreviewed)
    node = graph[node_id]
    run = repo.run(run_id)
    spec = _spec_of(run)
    signature = _signature(spec)
    reserved = {"init_json", "torch", "Tensor", "json"}
    input_names = [_identifier(n, reserved) for n in signature["inputs"]]
    state_args = []
    for key in signature["state"]:
        arg = _identifier(key, reserved | set(input_names) | set(state_args))
        state_args.append(arg)
    params = [f"{n}: {t}" for n, t in zip(input_names, signature["input_types"])] + [f"{a}: Tensor" for a in state_args]
    n_out = signature["outputs"]
    first_tensor = next((n for n, t in zip(input_names, signature["input_types"]) if t == "Tensor"), None)
    if first_tensor is None:
        raise ReviewError("the reference's forward takes no tensor: nothing to register as a tensor op")
    ev = node.evaluation
    verdict = verdicts(repo, run_id).get(node_id)
    context = {
        "qualname": qualname,
        "namespace": namespace,
        "name": name,
        "run_id": run_id,
        "node_id": node_id,
        "spec_name": spec.name,
        "input_names": input_names,
        "state_names": list(signature["state"]),
        "state_args": state_args,
        "signature": ", ".join(params),
        "returns": "Tensor" if n_out == 1 else f"tuple[{', '.join(['Tensor'] * n_out)}]",
        "n_outputs": n_out,
        "first_tensor": first_tensor,
        "init_doc": "*init_inputs",
        "baseline": spec.baseline,
        "warmup_ms": WARMUP_MS,
        "rep_ms": REP_MS,
    }
    record = {
        "op": qualname,
        "run": run_id,
        "node": node_id,
        "spec": spec.name,
        "baseline": spec.baseline,
        "review": None
        if verdict is None
        else {"verdict": verdict.verdict, "reviewer": verdict.reviewer, "notes": verdict.notes},
        "tolerances": {d: spec.tolerance(d).model_dump() for d in spec.dtypes},
        # The benchmark re-times the cases the node was timed at; the test checks the spec's shapes.
        "cases_cuda": (
            [{"label": s.label, "params": s.params, "dtype": s.dtype} for s in ev.shapes]
            if ev.timed
            else [{"label": c.label, "params": c.params, "dtype": c.dtype} for c in spec.cases("cuda")]
        ),
        "cases_interpret": [{"label": c.label, "params": c.params, "dtype": c.dtype} for c in spec.cases("interpret")],
        "recorded": {
            "device": ev.device,
            "gpu": ev.versions.gpu,
            "fitness": ev.fitness,
            "shapes": [
                {"label": s.label, "latency_ms": s.latency_ms, "baseline_ms": s.baseline_ms, "speedup": s.speedup}
                for s in ev.shapes
            ],
        },
    }
    files = {
        **_helper_modules(node.source),
        f"{name}_kernel.py": header_and_source,
        f"{name}_reference.py": spec.reference_source,
        f"{name}_op.py": _render("op.py.j2", context),
        f"{name}_test.py": _render("test_op.py.j2", context),
        f"{name}_bench.py": _render("bench_op.py.j2", context),
        f"{name}_export.json": json.dumps(record, indent=2) + "\n",
    }
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for fname, text in files.items():
            (out_dir / fname).write_text(text)
            written.append(out_dir / fname)
    except OSError as e:
        raise ReviewError(f"{out_dir}: cannot write: {e.strerror or e}") from None
    return written


def _helper_modules(source: str) -> dict[str, str]:
    """The knowledge base's shared helper modules the kernel imports, by file name: the folder must
    run without the knowledge base."""
    from kernelevolve.paths import kernel_helpers

    return {path.name: path.read_text() for path in kernel_helpers(source)}


def _spec_of(run):
    from kernelevolve.runs import RunError, load_run_spec

    try:
        return load_run_spec(run)
    except RunError as e:  # an op checked against another reference than the run's would lie
        raise ReviewError(str(e)) from None


def _signature(spec) -> dict:
    """The reference's forward inputs (names, op types), state keys and output count, from one call
    at its first interpreter shape on the CPU."""
    import torch

    from kernelevolve.harness.runtime import modules

    case = spec.cases("interpret")[0]
    try:
        ref_module = modules.load_module(str(spec.reference), "kernelevolve_export_reference", case.params)
        dtype = modules.dtype_of(case.model_dump())
        model = modules.build_reference(ref_module, 0, dtype, "cpu")
        inputs = modules.make_inputs(ref_module, 0, dtype, "cpu")
        with torch.no_grad():
            out = model(*inputs)
        outputs = modules.flatten(out)
    except Exception as e:  # the reference is the spec's, but say which part failed in one line
        raise ReviewError(
            f"the reference {spec.reference.name} could not run at {case.label}: "
            f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        ) from None
    if not isinstance(out, torch.Tensor) and not (
        isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out)
    ):
        raise ReviewError(
            "the reference's forward returns nested outputs: a custom op returns a tensor or a flat tuple"
        )
    types = []
    for i, x in enumerate(inputs):
        kind = {torch.Tensor: "Tensor", bool: "bool", int: "int", float: "float"}.get(type(x))
        if kind is None and isinstance(x, torch.Tensor):
            kind = "Tensor"
        if kind is None:
            raise ReviewError(
                f"input {i} of the reference is a {type(x).__name__}: a custom op takes tensors, ints, floats and bools"
            )
        types.append(kind)
    params = [p for p in inspect.signature(ref_module.Model.forward).parameters.values()][1:]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) != len(inputs):
        names = [f"input{i}" for i in range(len(inputs))]
    return {"inputs": names, "input_types": types, "state": list(model.state_dict().keys()), "outputs": len(outputs)}


def _identifier(text: str, taken: set) -> str:
    base = re.sub(r"\W", "_", text)
    base = base if base and not base[0].isdigit() else "_" + base
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _render(template: str, context: dict) -> str:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("kernelevolve.review", "op_templates"),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(template).render(**context)


# -- a single file that stands alone -------------------------------------------------------------


def standalone_source(header_and_source: str) -> str:
    """The exported file with the knowledge base's helper modules it imports (`from _row_io import
    ...`, found as kernelevolve.paths.kernel_helpers finds them) written into it, so that it needs
    only torch and triton: each helper's text (its docstring left out) where the kernel first
    imported one, dependencies first, its `from helper import x as y` lines turned into `y = x`.

    ReviewError with the list of helpers when that cannot be done faithfully: a helper imported as a
    module (`import _flash_hopper`), inside a function, or relatively, or two files that define one
    name differently. The file is returned unchanged when it imports no helper."""
    import ast

    from kernelevolve.paths import kernel_helpers

    helpers = {p.stem: p for p in kernel_helpers(header_and_source)}
    if not helpers:
        return header_and_source
    texts = {name: path.read_text() for name, path in helpers.items()}
    listed = ", ".join(f"{n}.py" for n in sorted(helpers))
    refuse = lambda why: ReviewError(  # noqa: E731
        f"the kernel imports knowledge-base modules ({listed}) that cannot be written into one file: {why}; "
        "export it with --as-op DIR (the folder carries them) or copy them beside the file"
    )

    def helper_imports(name: str, tree: ast.Module) -> tuple[list[tuple[ast.stmt, list[str]]], list[str]]:
        """(top-level `from helper import ...` statements with their alias lines, helpers they name)."""
        found, deps = [], []
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] in helpers for a in node.names):
                raise refuse(f"{name} imports a helper as a module (`import {node.names[0].name}`)")
            if not isinstance(node, ast.ImportFrom):
                continue
            module = (node.module or "").split(".")[0]
            if node.level and module in helpers or (not node.level and module in helpers and node.module != module):
                raise refuse(f"{name} imports {node.module} in a way one file cannot keep")
            if node.level or module not in helpers:
                continue
            if id(node) not in top:
                raise refuse(f"{name} imports {module} inside a function or block")
            if any(a.name == "*" for a in node.names):
                raise refuse(f"{name} imports * from {module}")
            found.append((node, [f"{a.asname} = {a.name}" for a in node.names if a.asname and a.asname != a.name]))
            deps.append(module)
        return found, deps

    def defined(tree: ast.Module, skip: set[int]) -> dict[str, str]:
        """Top-level name -> the text of the statement binding it (helper imports left out)."""
        out: dict[str, str] = {}
        for stmt in tree.body:
            if id(stmt) in skip:
                continue
            names: list[str] = []
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [stmt.name]
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                names = [(a.asname or a.name).split(".")[0] for a in stmt.names]
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            for n in names:
                out[n] = ast.dump(stmt) if isinstance(stmt, (ast.Import, ast.ImportFrom)) else f"{id(stmt)}"
        return out

    def cut(text: str, tree: ast.Module, replace: list[tuple[ast.stmt, list[str]]], drop_docstring: bool):
        """`text` with the statements in `replace` swapped for their alias lines (and the docstring out)."""
        lines = text.splitlines(keepends=True)
        edits = [(s.lineno, s.end_lineno, [a + "\n" for a in aliases]) for s, aliases in replace]
        body = tree.body
        if drop_docstring and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                edits.append((body[0].lineno, body[0].end_lineno, []))
        for start, end, new in sorted(edits, reverse=True):
            lines[start - 1 : end] = new
        return lines

    trees, imports, order = {}, {}, []
    for name, text in texts.items():
        trees[name] = pysource.parse(text)
        if any(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in trees[name].body):
            raise refuse(f"{name} has a `from __future__` import")
        imports[name] = helper_imports(name, trees[name])
    seen: set[str] = set()

    def visit(name: str) -> None:  # dependencies first
        if name in seen:
            return
        seen.add(name)
        for dep in imports[name][1]:
            visit(dep)
        order.append(name)

    kernel_tree = pysource.parse(header_and_source)
    kernel_imports, kernel_deps = helper_imports("the kernel", kernel_tree)
    for dep in kernel_deps:
        visit(dep)
    bound: dict[str, tuple[str, str]] = {}
    files = [(n, trees[n], {id(s) for s, _ in imports[n][0]}) for n in order]
    files.append(("the kernel", kernel_tree, {id(s) for s, _ in kernel_imports}))
    for where, tree, skip in files:
        for n, how in defined(tree, skip).items():
            if n in bound and bound[n][1] != how:
                raise refuse(f"{bound[n][0]} and {where} both define {n}")
            bound.setdefault(n, (where, how))
    block = [f"# ---- knowledge-base helpers written into this file ({listed}): it needs only torch and triton ----\n"]
    for name in order:
        block.append(f"# ---- from knowledge_base/kernels/{name}.py ----\n")
        block += cut(texts[name], trees[name], imports[name][0], drop_docstring=True)
        if not block[-1].endswith("\n"):
            block[-1] += "\n"
    block.append("# ---- the kernel ----\n")
    first = min(kernel_imports, key=lambda item: item[0].lineno)[0]
    lines = cut(header_and_source, kernel_tree, [(s, a) for s, a in kernel_imports if s is not first], False)
    aliases = [a + "\n" for s, a_list in kernel_imports if s is first for a in a_list]
    lines[first.lineno - 1 : first.end_lineno] = block + aliases
    return "".join(lines)
