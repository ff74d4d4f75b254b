"""Correctness harness (CPU interpreter or GPU): `main(config)` judges one candidate.

Before the candidate is imported: the reference's inputs and outputs for every case and trial
(fresh seeds, perturbed parameters, outputs in float64), and the tripwire. Then per case and
trial: the candidate's allocations poisoned (unwritten elements fail), inputs compared before
and after the call (`mutates_input`), outputs that alias an input refused, the first call
watched for Triton launches and torch compute ops (`not_a_kernel`), outputs compared; finally
repeated calls on rotated, refreshed input buffers (`inconsistent`: cached or late garbage).
The verdict is the JSON file at config["result_path"]; nothing printed counts.
"""

from __future__ import annotations

from kernelevolve.harness.runtime.start import begin
from kernelevolve.harness.runtime.state import failure_class, import_candidate, one_line, report_memory, wait_for_go

REPEAT_CALLS = 6  # after the trials: buffers X, Y alternate, values cycle over the trials' inputs


def main(config: dict) -> None:
    result, device = begin(config)
    import torch

    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import modules
    from kernelevolve.harness.runtime.guard import InputGuard, KernelMonitor, Tripwire

    sync = torch.cuda.synchronize if device == "cuda" else None
    trials = config["trials"]
    # A warm process waits here for its candidate: on the GPU before any GPU work (another
    # candidate may be timed meanwhile), on the CPU only once the reference's outputs are ready.
    if device == "cuda":
        torch.empty(1, device="cuda")  # the CUDA context now (no kernel runs): not paid after the go
        config.update(wait_for_go(config, result))

    # ---- the reference, before any candidate code exists -----------------------------------
    prepared = []
    for n, case in enumerate(config["cases"]):
        result.stage(f"{case['label']} reference")
        ref_mod = modules.load_module(config["reference_path"], f"kernelevolve_reference_{n}", case["params"])
        dtype = modules.dtype_of(case)
        runs = []
        for trial in range(trials):
            seed = config["seed"] + 1000 * trial + 7 * (n + 1)
            try:
                reference = modules.build_reference(ref_mod, seed, dtype, device)
                inputs = modules.make_inputs(ref_mod, seed + 17, dtype, device)
                expected, refs = cmp.reference_outputs(reference, inputs, sync)
            except Exception as exc:
                result.finish("reference", f"{case['label']}: the reference itself failed: " + one_line(exc), exc)
            runs.append((seed, reference, inputs, expected, refs))
        # The repeated calls use the last trial's model on every trial's inputs (a model the same as the
        # trial's own, e.g. one without parameters, has its outputs already: GPU memory is the limit).
        last = runs[-1][1]
        repeat = [
            (r[2], *(r[3:5] if _same_model(r[1], last) else cmp.reference_outputs(last, r[2], sync))) for r in runs
        ]
        prepared.append((case, ref_mod, dtype, runs, repeat))

    if device != "cuda":
        config.update(wait_for_go(config, result))
    else:  # what judging holds on the GPU before the candidate adds its own (the evaluator's memory budget)
        report_memory(result, torch)
    tripwire = Tripwire()
    candidate = import_candidate(config, result)

    allowed = set(config.get("allow_torch_ops", []))
    inplace = bool(config.get("inplace", False))
    tol_of = config["tolerances"]

    def call(model, inputs, monitor=None):
        with cmp.poisoned_allocations():
            if monitor is None:
                return modules.flatten(cmp.run_model(model, inputs, sync))
            with monitor:
                return modules.flatten(cmp.run_model(model, inputs, sync))

    all_ok = True
    for case, ref_mod, dtype, runs, repeat in prepared:
        label, tol = case["label"], tol_of[case["dtype"]]
        entry = {
            "label": label,
            "params": case["params"],
            "dtype": case["dtype"],
            "correct": None,
            "failure": None,
            "message": "",
            "max_abs_err": None,
            "max_rel_err": None,
        }
        result.cases.append(entry)
        max_abs = max_rel = None
        new = None
        for trial, (seed, reference, inputs, expected, refs) in enumerate(runs):
            result.stage(f"{label} trial {trial}")
            try:
                with cmp.poisoned_allocations():
                    new = modules.build_candidate(ref_mod, candidate, reference, seed, dtype, device)
            except modules.ConstructionError as exc:
                result.finish("import", "ModelNew(*get_init_inputs()) raised " + one_line(exc.__cause__), exc)
            cand_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            guard = InputGuard(cand_inputs)
            monitor = KernelMonitor(allowed) if trial == 0 else None
            try:
                outs = call(new, cand_inputs, monitor)
            except Exception as exc:
                entry.update(correct=False, failure=failure_class(exc), message=one_line(exc))
                result.finish(entry["failure"], f"{label}: " + one_line(exc), exc)
            if changed := tripwire.changed():  # before any comparison is trusted
                result.finish("tampering", f"the candidate replaced {', '.join(changed[:4])} while it ran")
            if monitor is not None and (reason := monitor.stream_verdict()):
                entry.update(correct=False, failure="timing", message=reason)
                result.finish("timing", f"{label}: {reason}")
            if monitor is not None and (reason := monitor.verdict()):
                entry.update(correct=False, failure="not_a_kernel", message=reason)
                result.finish("not_a_kernel", f"{label}: {reason}")
            if not inplace:
                if mutated := guard.mutated():
                    reason = f"forward wrote into input {mutated[0]} (the spec's operator is not in place)"
                    entry.update(correct=False, failure="mutates_input", message=reason)
                    result.finish("mutates_input", f"{label}: {reason}")
                if aliased := guard.aliased(outs):
                    o, i = aliased[0]
                    reason = f"output {o} shares memory with input {i}: a view of an input is not a result"
                    entry.update(correct=False, failure="mutates_input", message=reason)
                    result.finish("mutates_input", f"{label}: {reason}")
            ok, message, abs_err, rel_err = cmp.compare(outs, expected, refs, tol)
            if abs_err is not None:
                max_abs, max_rel = max(max_abs or 0.0, abs_err), max(max_rel or 0.0, rel_err)
            entry.update(max_abs_err=max_abs, max_rel_err=max_rel)
            if not ok:
                entry.update(correct=False, failure="incorrect", message=f"trial {trial} (seed {seed}): {message}")
                break
        if entry["failure"] is None:
            failure, problem = _repeated_calls(new, repeat, call, cmp.compare, tol, torch, tripwire)
            if failure:
                entry.update(correct=False, failure=failure, message=problem)
                result.finish(failure, f"{label}: {problem}")
            entry["correct"] = True
        all_ok = all_ok and entry["correct"] is True
        result.write()
        changed = tripwire.changed()
        if changed:
            result.finish("tampering", f"the candidate replaced {', '.join(changed[:4])} while it ran")
    if not all_ok:
        first = next(c for c in result.cases if c["correct"] is not True)
        result.finish("incorrect", f"{first['label']}: {first['message']}")
    result.finish()


def _same_model(a, b) -> bool:
    """Same class and the same parameters and buffers (the reference is deterministic)."""
    import torch

    if a is b:
        return True
    if type(a) is not type(b):
        return False
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(
        isinstance(sa[k], torch.Tensor) and sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]) for k in sa
    )


def _repeated_calls(model, runs, call, compare, tol, torch, tripwire) -> tuple[str | None, str | None]:
    """Call the same model again on two buffers whose values change between calls; every output
    must match the reference for the values it was given (no caching on a pointer, no garbage
    after the first calls). `runs`: (inputs, expected, refs) per trial, for this model."""
    if len(runs) < 2:
        return None, None
    buffers = [[x.clone() if isinstance(x, torch.Tensor) else x for x in runs[k][0]] for k in range(2)]
    for i in range(REPEAT_CALLS):
        values = (i // 2 + i % 2) % len(runs)  # each buffer sees every trial's values in turn
        bufs = buffers[i % 2]
        for b, v in zip(bufs, runs[values][0]):
            if isinstance(b, torch.Tensor):
                b.copy_(v)
        outs = call(model, bufs)
        if changed := tripwire.changed():
            return "tampering", f"the candidate replaced {', '.join(changed[:4])} while it ran"
        ok, message, _, _ = compare(outs, runs[values][1], runs[values][2], tol)
        if not ok:
            return "inconsistent", (
                f"call {i + 1} of {REPEAT_CALLS} after the trials (input buffer {i % 2}, values "
                f"of trial {values}) returned a wrong result: {message}"
            )
    return None, None
