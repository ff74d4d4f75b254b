"""Preflight harness: can the reference itself run at every case? `main(config)` answers.

Per case: the reference module loaded with the case's constant overrides, built with its
parameters, given inputs, and run once at the case's dtype and once in float64 (what the
correctness harness computes before it judges a candidate). No candidate is involved. Each
case's entry says ok or why not; a case that kills the process (out of memory, a signal, the
timeout) is the one the result file's stage names.
"""

from __future__ import annotations

import sys

from kernelevolve.harness.runtime.configs import PreflightConfig
from kernelevolve.harness.runtime.report import PreflightCase
from kernelevolve.harness.runtime.state import Result, one_line


def main(raw: dict) -> None:
    config = PreflightConfig.load(raw)
    result = Result(config.result_path)
    device = "cuda" if config.device == "cuda" else "cpu"
    try:
        import torch  # noqa: F401
    except Exception as exc:  # the environment is broken, not the reference
        print(f"harness: cannot import torch: {exc}", file=sys.stderr)
        sys.exit(3)
    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import modules

    sync = torch.cuda.synchronize if device == "cuda" else None
    for n, case in enumerate(config.cases):
        label = case.label
        result.stage(label)
        entry = PreflightCase(label)
        try:
            ref_mod = modules.load_module(config.reference_path, f"kernelevolve_preflight_{n}", case.params)
            dtype = modules.dtype_of(case)
            reference = modules.build_reference(ref_mod, config.seed + n, dtype, device)
            inputs = modules.make_inputs(ref_mod, config.seed + n + 17, dtype, device)
            cmp.reference_outputs(reference, inputs, sync)
            entry.ok = True
        except BaseException as exc:  # noqa: BLE001 - MemoryError and SystemExit are answers here too
            entry.message = one_line(exc)
        result.cases.append(entry)
        if not entry.ok:
            break  # one case that cannot run is enough to stop a run
    result.finish()
