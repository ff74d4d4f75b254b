"""The sandboxed side of the static cost estimate (static_cost.py): run by the evaluator after a candidate
passed under the interpreter, in a process of its own with the same sandbox as the candidate's check.

It builds the candidate as the check does (the reference's parameters copied in), calls its forward on
one case under the Triton interpreter while counting what each launch does (launches, programs, bytes
that masked loads and stores really touch), then compiles each launched kernel, with the argument types,
constexprs, alignment and num_warps/num_stages of its launch, for the spec's GPU (`triton.compile` for a
`GPUTarget`, ptxas included in Triton's wheel: no GPU needed) and reads what ptxas reports: registers,
spill bytes, shared memory. Nothing here is timed; everything it writes is the candidate process's word,
used only to rank candidates that no GPU has timed yet.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import time
import traceback

from kernelevolve import pysource
from kernelevolve.harness.runtime.configs import ProbeConfig

START = time.monotonic()
RESERVED = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid")
PTXAS = re.compile(
    r"Compiling entry function '(?P<name>[^']+)'.*?Used (?P<regs>\d+) registers"
    r"(?:.*?(?P<stack>\d+) bytes stack frame)?(?:.*?(?P<stores>\d+) bytes spill stores)?"
    r"(?:.*?(?P<loads>\d+) bytes spill loads)?",
    re.S,
)


class _Out:
    def __init__(self, path: str) -> None:
        self.path = path
        self.data: dict = {"stage": "start", "launches": [], "kernels": {}, "failure": None}
        self._replace, self._dump, self._exit, self._open = os.replace, json.dump, os._exit, open

    def stage(self, text: str) -> None:
        now = time.monotonic()
        previous = self.data["stage"]
        self.data.setdefault("stages_s", {})[previous] = round(now - getattr(self, "_last", START), 3)
        self._last = now
        self.data["stage"] = text
        self.write()

    def write(self) -> None:
        tmp = self.path + ".tmp"
        with self._open(tmp, "w") as f:
            self._dump(self.data, f)
        self._replace(tmp, self.path)

    def finish(self, failure: str | None = None) -> None:
        self.stage("done")
        if failure:
            self.data["failure"] = failure
        self.data["stage"] = "done"
        self.write()
        sys.stdout.flush()
        sys.stderr.flush()
        self._exit(0)


def _wait(config: ProbeConfig, out: _Out, stage: str) -> None:
    """Until the evaluator writes `go_path`; `stop_path` (or the wait running out) ends the process quietly."""
    out.stage(stage)
    deadline = time.monotonic() + config.wait_s
    while not os.path.exists(config.go_path):
        if (config.stop_path and os.path.exists(config.stop_path)) or time.monotonic() > deadline:
            out.data["cancelled"] = True
            out.finish()
        time.sleep(0.05)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


class _Recorder:
    """Launches of interpreted kernels and the bytes their loads and stores touch (masked-off lanes excluded)."""

    def __init__(self) -> None:
        self.launches: list[dict] = []
        self.specs: dict[str, dict] = {}  # key -> what a compile needs (fn, signature, constexprs, attrs, options)
        self.current: dict | None = None
        self.active = False

    def install(self) -> None:
        import numpy as np
        from triton.runtime import interpreter

        recorder = self
        run = interpreter.InterpretedFunction.run
        load = interpreter.InterpreterBuilder.create_masked_load
        store = interpreter.InterpreterBuilder.create_masked_store
        rmw = interpreter.InterpreterBuilder.create_atomic_rmw

        def element_bytes(ptrs) -> int:
            return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

        def count(ptrs, mask, factor: int = 1) -> None:
            if recorder.current is None:
                return
            n = int(np.count_nonzero(mask.data)) if mask is not None else int(np.size(ptrs.data))
            recorder.current["bytes"] += factor * n * element_bytes(ptrs)

        def run_recorded(fn_self, *args, grid, warmup, **kwargs):
            if warmup or not recorder.active or recorder.current is not None:
                return run(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            entry = recorder.launch(fn_self, args, kwargs, grid)
            recorder.current = entry
            try:
                return run(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                recorder.current = None

        def load_recorded(self, ptrs, mask, other, *rest, **kw):
            count(ptrs, mask)
            return load(self, ptrs, mask, other, *rest, **kw)

        def store_recorded(self, ptrs, value, mask, *rest, **kw):
            count(ptrs, mask)
            return store(self, ptrs, value, mask, *rest, **kw)

        def rmw_recorded(self, op, ptrs, val, mask, *rest, **kw):
            count(ptrs, mask, 2)
            return rmw(self, op, ptrs, val, mask, *rest, **kw)

        interpreter.InterpretedFunction.run = run_recorded
        interpreter.InterpreterBuilder.create_masked_load = load_recorded
        interpreter.InterpreterBuilder.create_masked_store = store_recorded
        interpreter.InterpreterBuilder.create_atomic_rmw = rmw_recorded

    def launch(self, fn_self, args: tuple, kwargs: dict, grid) -> dict:
        import inspect

        from triton.backends.nvidia.compiler import CUDABackend
        from triton.runtime.jit import native_specialize_impl

        fn = fn_self.fn
        options = {k: kwargs[k] for k in RESERVED if k in kwargs and kwargs[k] is not None}
        bound = inspect.signature(fn).bind_partial(*args, **{k: v for k, v in kwargs.items() if k not in RESERVED})
        bound.apply_defaults()
        call_args = dict(bound.arguments)
        try:
            shape = grid(call_args) if callable(grid) else grid
            programs = 1
            for g in tuple(shape)[:3]:
                programs *= int(g)
        except Exception:
            programs = None
        annotations = {k: str(v) for k, v in getattr(fn, "__annotations__", {}).items()}
        signature, constexprs, attrs, shown = {}, {}, {}, []
        for i, (name, value) in enumerate(call_args.items()):
            if "constexpr" in annotations.get(name, ""):
                signature[name], constexprs[(i,)] = "constexpr", value
                shown.append(f"{name}={value!r}")
                continue
            try:
                kind, attr = native_specialize_impl(CUDABackend, value, False, True, True)
            except Exception:
                kind, attr = None, None
            if kind is None:
                signature = None
                break
            signature[name] = kind
            if kind == "constexpr":
                constexprs[(i,)] = attr
            elif isinstance(attr, str) and attr:
                attrs[str(i)] = attr
            shown.append(f"{name}:{kind}{attr if isinstance(attr, str) else ''}")
        key = f"{fn.__module__}.{fn.__qualname__}({', '.join(shown)}){sorted(options.items())}"
        if key not in self.specs:
            encoded = [[i[0], _encode(v)] for i, v in constexprs.items()]
            if signature is None or any(v is _UNSERIALIZABLE for _, v in encoded):
                signature = None
            self.specs[key] = {
                "name": fn.__name__,
                "module": fn.__module__,
                "qualname": fn.__qualname__,
                "signature": signature,
                "constexprs": encoded if signature is not None else [],
                "attrs": attrs,
                "options": options,
            }
        entry = {"kernel": fn.__name__, "key": key, "programs": programs, "bytes": 0}
        self.launches.append(entry)
        return entry


def _tensors(obj) -> list:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors(x)]
    return []


_UNSERIALIZABLE = object()


def _encode(value):
    """A constexpr's value as JSON: numbers, strings, None, and Triton dtypes by name."""
    import triton.language as tl

    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if isinstance(value, tl.dtype):
        return {"dtype": value.name}
    if isinstance(value, tl.constexpr):
        return _encode(value.value)
    return _UNSERIALIZABLE


def _decode(value: dict):
    import triton.language as tl

    if "dtype" in value:
        return getattr(
            tl,
            {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}.get(
                value["dtype"], value["dtype"]
            ),
        )
    return value["v"]


def _compile(spec: dict, target_arch: int) -> dict:
    """One kernel specialization compiled for the target; ptxas's own report read back."""
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    if spec["signature"] is None:
        return {"error": "an argument of a type the compiler cannot be told"}
    if "<locals>" in spec["qualname"]:
        return {"error": "a kernel defined inside a function: not reachable to compile"}
    try:
        obj = sys.modules.get(spec["module"]) or importlib.import_module(spec["module"])
    except Exception as exc:
        return {"error": f"importing {spec['module']}: {_one_line(exc)}"}
    for part in spec["qualname"].split("."):
        obj = getattr(obj, part, None)
    for _ in range(8):  # autotune / heuristics wrap the JIT function
        if isinstance(obj, JITFunction) or obj is None:
            break
        obj = getattr(obj, "fn", None)
    if not isinstance(obj, JITFunction):
        return {"error": "not a JIT function once the interpreter is off"}
    options = dict(spec["options"])
    options.setdefault("num_warps", 4)
    options.setdefault("num_stages", 3)
    constexprs = {(i,): _decode(v) for i, v in spec["constexprs"]}
    attrs = {(int(i),): CUDABackend.parse_attr(a) for i, a in spec["attrs"].items()}
    log = io.StringIO()
    began = time.monotonic()
    triton.knobs.nvidia.dump_ptxas_log = True
    try:
        with contextlib.redirect_stdout(log):
            kernel = triton.compile(
                ASTSource(obj, spec["signature"], constexprs, attrs),
                target=GPUTarget("cuda", target_arch, 32),
                options=options,
            )
    except Exception as exc:
        return {"error": "does not compile for the GPU: " + _one_line(exc)}
    finally:
        triton.knobs.nvidia.dump_ptxas_log = False
    out = {
        "num_warps": int(options["num_warps"]),
        "num_stages": int(options["num_stages"]),
        "shared_bytes": int(getattr(kernel.metadata, "shared", 0) or 0),
        "compile_s": round(time.monotonic() - began, 3),
    }
    match = PTXAS.search(log.getvalue())
    if match:
        out["registers"] = int(match["regs"])
        out["spill_bytes"] = int(match["stores"] or 0) + int(match["loads"] or 0)
        out["stack_bytes"] = int(match["stack"] or 0)
    ptx = kernel.asm.get("ptx", "")
    if isinstance(ptx, str):
        body = [line.strip() for line in ptx.splitlines() if line.strip() and not line.strip().startswith(("//", "."))]
        out["ptx_instructions"] = len(body)
        out["tensor_core"] = any(x.startswith(("mma.", "wgmma.")) for x in body)
    return out


def _kernels_only(path: str, name: str, import_paths: list[str]):
    """The module at `path` without torch: each top-level statement run on its own, except classes and
    torch imports, and one that fails skipped; a module it imports from `import_paths` (the knowledge
    base's helpers) read the same way. What is left holds the module's Triton kernels and constants,
    as JIT functions, at a fraction of what importing torch costs."""
    import ast
    import types

    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    with open(path) as f:
        tree = pysource.parse(f.read(), filename=path)
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
            if any(n.split(".")[0] == "torch" for n in names):
                continue
            for top in {n.split(".")[0] for n in names}:
                local = next(
                    (
                        os.path.join(p, top + ".py")
                        for p in import_paths
                        if os.path.isfile(os.path.join(p, top + ".py"))
                    ),
                    None,
                )
                if local and top not in sys.modules:
                    with contextlib.suppress(Exception):
                        _kernels_only(local, top, import_paths)
        with contextlib.suppress(Exception):
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec"), module.__dict__)
    return module


def main(raw: dict) -> None:
    """phase "count": the interpreted forward, counted; phase "compile": the kernels compiled (no interpreter:
    Triton's own helpers must be JIT functions, so this is a process of its own)."""
    config = ProbeConfig.load(raw)
    out = _Out(config.result_path)
    try:
        import triton  # noqa: F401
    except Exception as exc:
        print(f"static probe: cannot import triton: {exc}", file=sys.stderr)
        sys.exit(3)

    sys.path[:0] = list(config.import_paths)
    if config.phase == "compile":  # no torch here: the kernels alone are read (_kernels_only)
        import triton.runtime.cache as cache

        cache.triton_key = lambda: "kernelevolve-static-probe"  # skips hashing Triton's own files (seconds)
        # Started with the evaluation: imports now, then waits for the kernels the count saw.
        _wait(config, out, "waiting for the count")
        with open(config.go_path) as f:
            specs = json.load(f)  # written by the evaluator: what the count saw
        out.stage("import")
        try:
            _kernels_only(config.candidate_path, "kernelevolve_candidate", list(config.import_paths))
        except Exception as exc:
            out.finish("reading the candidate's kernels: " + _one_line(exc))
        budget = time.monotonic() + config.compile_budget_s
        for key, spec in specs.items():
            out.stage(f"compile {spec['name']}")
            if time.monotonic() > budget:
                out.data["kernels"][key] = {"name": spec["name"], "error": "not compiled: time budget spent"}
                continue
            out.data["kernels"][key] = {"name": spec["name"]} | _compile(spec, config.arch)
        out.finish()

    try:
        import torch
    except Exception as exc:
        print(f"static probe: cannot import torch: {exc}", file=sys.stderr)
        sys.exit(3)
    from kernelevolve.harness.runtime.interpreter_compat import patch_triton_interpreter
    from kernelevolve.harness.runtime import modules

    patch_triton_interpreter()
    case = config.case
    out.stage("reference")
    try:
        ref = modules.load_module(config.reference_path, "kernelevolve_reference", case.params)
        dtype = modules.dtype_of(case)
        reference = modules.build_reference(ref, config.seed, dtype, "cpu")
        inputs = modules.make_inputs(ref, config.seed + 17, dtype, "cpu")
    except Exception as exc:
        out.finish("the reference: " + _one_line(exc))
    _wait(config, out, "waiting for the verdict")  # started with the evaluation: runs only for a correct candidate
    out.stage("candidate")
    recorder = _Recorder()
    recorder.install()
    try:
        candidate = modules.load_module(config.candidate_path, "kernelevolve_candidate")
        model = modules.build_candidate(ref, candidate, reference, config.seed, dtype, "cpu")
        tuned = any(type(v).__name__ in ("Autotuner", "Heuristics") for v in vars(candidate).values())
        with torch.no_grad():
            if tuned:  # autotuning launches every config on the first call: the second is the one that counts
                out.stage("forward (autotuning)")
                model(*inputs)
            out.stage("forward")
            recorder.active = True
            outputs = model(*inputs)
            recorder.active = False
    except Exception as exc:
        out.data["log"] = traceback.format_exc(limit=8)[-3000:]
        out.finish("the candidate's forward: " + _one_line(exc))
    out.data["launches"] = recorder.launches
    out.data["specs"] = recorder.specs
    seen: set[int] = set()
    io_bytes = 0
    for t in _tensors(inputs) + _tensors(outputs) + list(reference.state_dict().values()):
        if id(t) not in seen:
            seen.add(id(t))
            io_bytes += t.numel() * t.element_size()
    out.data["io_bytes"] = io_bytes
    out.finish()
