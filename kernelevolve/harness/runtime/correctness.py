"""The candidate's side of the correctness check (CPU interpreter or GPU): `main(config)` runs it.

This process runs candidate code, so nothing it says can make a candidate correct: it produces
outputs and hands them over (handover.py) to the judge (judge.py), a process that never imports the
candidate and computes the reference itself. What this process checks on its own are early, cheap
refusals with good messages, every one of which can only fail a candidate: an exception, a replaced
torch/triton callable (the tripwire), torch compute or no kernel launch on any call (the monitor is
active on every call of the process), launches off the caller's stream, inputs written, outputs that
alias an input or are not plain tensors.

Per case: every trial (its seed, perturbed reference parameters, fresh inputs) with `torch.empty*`
poisoned (unwritten elements read back as NaN), then REPEAT_CALLS calls on two buffers whose values
change between calls (a result cached on a pointer is stale). Every call's outputs are handed over:
the first trial's byte for byte (compared element by element; past handover.FULL_BYTES a sample of its
blocks, plus digests of the whole), the others as digests (compared as a whole: a few numbers, however
large the output).
"""

from __future__ import annotations

from kernelevolve.harness.runtime.configs import CorrectnessConfig
from kernelevolve.harness.runtime.report import CheckCase
from kernelevolve.harness.runtime.start import begin
from kernelevolve.harness.runtime.state import failure_class, import_candidate, one_line, wait_for_go

REPEAT_CALLS = 4  # after the trials: buffers X, Y alternate, values change on each buffer


def repeat_plan(trials: int) -> list[tuple[int, int]]:
    """(buffer, trial whose values it holds) of each repeated call; shared with the judge."""
    if trials < 2:
        return []
    return [(i % 2, (i // 2 + i % 2) % trials) for i in range(REPEAT_CALLS)]


def main(raw: dict) -> None:
    config = CorrectnessConfig.load(raw)
    result, device = begin(config)
    import torch

    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import handover, modules
    from kernelevolve.harness.runtime.input_guard import InputGuard
    from kernelevolve.harness.runtime.kernel_monitor import KernelMonitor
    from kernelevolve.harness.runtime.tripwire import Tripwire

    sync = torch.cuda.synchronize if device == "cuda" else None
    trials = config.trials
    outputs = config.outputs_dir
    # A warm process waits for its candidate: on the GPU before any GPU work (another candidate may be
    # timed meanwhile), on the CPU once its inputs are ready.
    if device == "cuda":
        torch.empty(1, device="cuda")  # the CUDA context now: not paid after the go
        handover.warm_up(device, [modules.dtype_of(c) or torch.float32 for c in config.cases] + [torch.float32])
        from kernelevolve.harness.runtime.warm import compile_triton

        compile_triton(torch)
        config = config.signalled(wait_for_go(config, result))

    # ---- the reference's models (for the parameters) and the inputs, before any candidate code --------
    prepared = []
    for n, case in enumerate(config.cases):
        result.stage(f"{case.label} inputs")
        ref_mod = modules.load_module(config.reference_path, f"kernelevolve_reference_{n}", case.params)
        dtype = modules.dtype_of(case)
        runs = []
        for trial in range(trials):
            seed = modules.trial_seed(config.seed, n, trial)
            try:
                reference = modules.build_reference(ref_mod, seed, dtype, device)
                inputs = modules.make_inputs(ref_mod, seed + 17, dtype, device)
            except Exception as exc:
                result.finish("reference", f"{case.label}: the reference itself failed: " + one_line(exc), exc)
            runs.append((seed, reference, inputs))
        prepared.append((case, ref_mod, dtype, runs))
    if device != "cuda":
        config = config.signalled(wait_for_go(config, result))

    tripwire = Tripwire()
    candidate = import_candidate(config, result)
    inplace = config.inplace
    monitor = KernelMonitor(set(config.allow_torch_ops))

    def fail(entry: CheckCase, failure: str, reason: str, exc: BaseException | None = None) -> None:
        entry.correct, entry.failure, entry.message = False, failure, reason
        result.finish(failure, f"{entry.label}: {reason}", exc)

    def call(entry: CheckCase, model, inputs: list, name: str) -> None:
        """One watched call; its outputs handed over as `name`, byte for byte (a large output: its sampled blocks
        and digests). Every call so: an output right on the first call and off by a few percent on later ones
        passed the digests alone (their width is 12 norm bounds), and so did an error the candidate put in the
        digests' null space (their seed is in its process)."""
        guard = InputGuard(inputs) if not inplace else None
        monitor.reset_call()
        try:
            with cmp.poisoned_allocations(), monitor:
                outs = modules.flatten(cmp.run_model(model, inputs, sync))
        except Exception as exc:
            fail(entry, failure_class(exc), one_line(exc), exc)
        if changed := tripwire.changed():  # before anything else is believed
            fail(entry, "tampering", f"the candidate replaced {', '.join(changed[:4])} while it ran")
        if reason := monitor.stream_verdict():
            fail(entry, "timing", reason)
        if reason := monitor.call_verdict():
            fail(entry, "not_a_kernel", f"{name}: {reason}")
        for i, out in enumerate(outs):
            if type(out) is not torch.Tensor:
                fail(entry, "incorrect", f"output {i} is a {type(out).__name__}, not a plain torch.Tensor")
        if guard is not None:
            if mutated := guard.mutated():
                fail(
                    entry,
                    "mutates_input",
                    f"forward wrote into input {mutated[0]} (the spec's operator is not in place)",
                )
            if aliased := guard.aliased(outs):
                o, i = aliased[0]
                fail(
                    entry,
                    "mutates_input",
                    f"output {o} shares memory with input {i}: a view of an input is not a result",
                )
        result.stage(f"{entry.label} handing over")
        handover.write_outputs(outputs, name, outs, config.seed)

    for n, (case, ref_mod, dtype, runs) in enumerate(prepared):
        label = case.label
        entry = CheckCase(label, params=case.params, dtype=case.dtype)
        result.cases.append(entry)
        new = None
        for trial, (seed, reference, inputs) in enumerate(runs):
            result.stage(f"{label} trial {trial}")
            try:
                with cmp.poisoned_allocations():
                    new = modules.build_candidate(ref_mod, candidate, reference, seed, dtype, device)
            except modules.ConstructionError as exc:
                result.finish("import", "ModelNew(*get_init_inputs()) raised " + one_line(exc.__cause__), exc)
            cand_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            call(entry, new, cand_inputs, f"c{n}.t{trial}")
        # The same model again on two buffers whose values change between calls.
        plan = repeat_plan(len(runs))
        if plan:
            result.stage(f"{label} repeated calls")
            buffers = [[x.clone() if isinstance(x, torch.Tensor) else x for x in runs[k][2]] for k in range(2)]
            for i, (b, values) in enumerate(plan):
                for dst, src in zip(buffers[b], runs[values][2]):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
                call(entry, new, buffers[b], f"c{n}.r{i}")
        result.write()
    result.finish()
