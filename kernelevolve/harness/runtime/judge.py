"""The judge (CPU interpreter or GPU): `main(config)` compares a candidate's outputs with the reference.

This process never imports the candidate, and nothing of the candidate's process reaches it but the
bytes of its outputs (handover.py builds plain tensors from them). It computes the reference itself
from the same seeds (modules.trial_seed / pool_seed), in float64 (float32 for 16-bit outputs: compare.precise_dtype),
while the candidate runs; at the
evaluator's go (the candidate's process has ended) it reads every output the candidate's process had
to hand over and compares: per element within atol + rtol * |ref|, and as a whole within norm_rtol
(compare.py). Its result file is the verdict the evaluator believes.

mode "check": the correctness trials and repeated calls (correctness.py's names c{n}.t{k}, c{n}.r{i}).
mode "timed": the timed calls a timing process kept (benchmark.py's c{n}.call{i}, values of set p);
a miss there is `incorrect` with the numbers, like any other. Its outside-timed loops' seeds may come
on stdin (from the evaluator alone: no file a candidate's process could read), with their call counts
in the prepare signal (where the baseline is cached); the calls it will recompute are then drawn and
computed while preparing, off the path from the timing to the verdict.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass

from kernelevolve.harness.runtime.configs import JudgeConfig, Tolerance
from kernelevolve.harness.runtime.report import WAITING_FOR_GO, CheckCase
from kernelevolve.harness.runtime.start import begin
from kernelevolve.harness.runtime.state import one_line, report_memory, wait_for_go


def main(raw: dict) -> None:
    config = JudgeConfig.load(raw)
    result, device = begin(config, kernels=False)
    import torch

    from kernelevolve.harness.runtime import handover, modules

    sync = torch.cuda.synchronize if device == "cuda" else None
    config = config.signalled(wait_for_go(config, result, "prepare"))  # the GPU may be used from here on
    if device == "cuda":  # the digests' first float64 product sets up cuBLAS (~0.15 s): now, not after the go
        from kernelevolve.harness.runtime import outside

        outside.digests([torch.ones(2 * outside.COLS, device="cuda")], 0)
    seeds = _secret_seeds() if config.mode == "timed" else {}
    expected: dict[str, tuple] = {}  # output name -> (meta tensors, precise values, what it was)
    prepared = []
    for n, case in enumerate(config.cases):
        label = case.label
        result.stage(f"{label} reference")
        ref_mod = modules.load_module(config.reference_path, f"kernelevolve_reference_{n}", case.params)
        dtype = modules.dtype_of(case)
        try:
            if config.mode == "check":
                prepared.append((n, case, _check_references(config, n, ref_mod, dtype, device, sync, expected)))
            else:
                prepared.append((n, case, _pool_references(config, n, ref_mod, dtype, device, sync, expected)))
                for name, plan in _loop_plans(config, n, seeds).items():
                    expected[name] = _loop_expectation(expected[f"c{n}.model"], plan["seed"], plan["calls"], sync)
        except Exception as exc:
            result.finish("reference", f"{label}: the reference itself failed: " + one_line(exc), exc)
    if device == "cuda":
        report_memory(result, torch)
    folder = config.outputs_dir
    early: dict[str, tuple] = {}  # verdicts on outputs handed over while the candidate still ran
    if config.mode == "check":
        result.stage(WAITING_FOR_GO)
        _judge_as_handed_over(config, prepared, expected, early, device)
    config = config.signalled(wait_for_go(config, result))

    for n, case, names in prepared:
        label, tol = case.label, config.tolerances[case.dtype]
        entry = CheckCase(label)
        result.cases.append(entry)
        result.stage(f"{label} comparing")
        if config.mode == "timed":
            kept = _kept_calls(folder, n, names)
            if isinstance(kept, str):
                entry.correct, entry.failure, entry.message = False, "tampering", kept
                result.finish("tampering", f"{label}: {kept}")
            expected.update({name: expected[pool] for name, _, _, pool in kept})
            names = [(name, what, cls) for name, what, cls, _ in kept]
        for name, what, miss_class in names:
            exp, refs = expected[name][:2]
            try:
                verdict = early.get(name) or _judge_one(folder, name, exp, refs, tol, device, config.seed)
                if isinstance(verdict, handover.HandoverError):
                    raise verdict
                ok, message, abs_err, rel_err = verdict
            except handover.HandoverError as exc:
                entry.correct, entry.failure, entry.message = False, "tampering", str(exc)
                result.finish("tampering", f"{label}: the candidate's process handed over no valid outputs ({exc})")
            if abs_err is not None:
                entry.max_abs_err = max(entry.max_abs_err or 0.0, abs_err)
                entry.max_rel_err = max(entry.max_rel_err or 0.0, rel_err)
            if not ok:
                entry.correct, entry.failure, entry.message = False, miss_class, f"{what}: {message}"
                break
        if entry.failure is None and config.mode == "timed":
            if problem := _outside_loops(config, n, expected, sync):
                entry.correct, entry.failure, entry.message = False, "incorrect", problem
        if entry.failure is None:
            entry.correct = True
        result.write()
    first = next((c for c in result.cases if c.correct is not True), None)
    if first is not None:
        result.finish(first.failure, f"{first.label}: {first.message}")
    result.finish()


def _judge_as_handed_over(config: JudgeConfig, prepared: list, expected: dict, early: dict, device: str) -> None:
    """While the candidate's process runs: judge each output as soon as it is handed over, until the
    evaluator's go (the process has ended) or stop; what is left is judged after the go."""
    import time

    from kernelevolve.harness.runtime import handover

    folder, go, stop = config.outputs_dir, config.go_path, config.stop_path

    def over() -> bool:
        return bool((go and os.path.exists(go)) or (stop and os.path.exists(stop)))

    for _, case, names in prepared:
        tol = config.tolerances[case.dtype]
        for name, _, _ in names:
            while handover.handed_over(folder, name) is None:
                if over():
                    return
                time.sleep(0.005)
            exp, refs = expected[name][:2]
            try:
                early[name] = _judge_one(folder, name, exp, refs, tol, device, config.seed)
            except handover.HandoverError as exc:
                early[name] = exc
            if early[name] and not isinstance(early[name], Exception) and not early[name][0]:
                return  # a miss: the rest need not be judged


def _judge_one(folder: str, name: str, exp: list, refs: list, tol: Tolerance, device: str, seed: int) -> tuple:
    """(ok, message, max abs err, norm-wise error) of the outputs handed over as `name`: element by element
    where their bytes were handed over, as a whole where their digests were."""
    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import handover

    kind = handover.handed_over(folder, name)
    if kind == "full":
        outs = handover.read_outputs(folder, name, device, seed)
        if not any(isinstance(o, handover.Sampled) for o in outs):
            return cmp.compare(outs, exp, refs, tol)
        # Outputs over handover.FULL_BYTES: their sampled blocks element by element, and the whole as digests.
        if len(outs) != len(exp):
            return False, f"forward returned {len(outs)} tensors, reference returns {len(exp)}", None, None
        outs_, exp_, refs_ = [], [], []
        for i, (o, want, ref) in enumerate(zip(outs, exp, refs)):
            if isinstance(o, handover.Sampled):
                where = f"output {i}: " if len(exp) > 1 else ""
                if o.shape != tuple(want.shape) or o.dtype != want.dtype:
                    return (
                        False,
                        f"{where}shape {o.shape} {o.dtype}, expected {tuple(want.shape)} {want.dtype}",
                        None,
                        None,
                    )
                blocks = ref.blocks if isinstance(ref, Slim) else handover.gather_blocks(ref.reshape(-1), o.blocks)
                o, want, ref = o.values, o.values.to("meta"), blocks
            outs_.append(o)
            exp_.append(want)
            refs_.append(ref)
        verdict = cmp.compare(outs_, exp_, refs_, tol)
        if verdict[0]:
            whole = _judge_digests(folder, name, exp, refs, tol, seed)
            if not whole[0]:
                return whole
        return verdict
    if kind is None:
        raise handover.HandoverError(f"{name}: no outputs handed over")
    return _judge_digests(folder, name, exp, refs, tol, seed)


def _judge_digests(folder: str, name: str, exp: list, refs: list, tol: Tolerance, seed: int) -> tuple:
    """(ok, message, None, None) of the digests handed over as `name` against the references'."""
    from kernelevolve.harness.runtime import handover, outside

    entries = handover.read_digests(folder, name)
    if len(entries) != len(exp):
        return False, f"forward returned {len(entries)} tensors, reference returns {len(exp)}", None, None
    for i, (e, want, ref) in enumerate(zip(entries, exp, refs)):
        where = f"output {i}: " if len(exp) > 1 else ""
        if tuple(e["shape"]) != tuple(want.shape):
            return False, f"{where}shape {tuple(e['shape'])}, expected {tuple(want.shape)}", None, None
        if e["dtype"] != str(want.dtype).removeprefix("torch."):
            return False, f"{where}dtype {e['dtype']}, expected {str(want.dtype).removeprefix('torch.')}", None, None
        want_digests, ref_norm = _ref_digests(ref, seed + i)
        if problem := outside.mismatch(e["digests"], want_digests, ref_norm, tol.norm_bound, squared=False):
            return False, where + problem, None, None
    return True, "", None, None


def _ref_digests(ref, seed: int) -> tuple:
    """(digests, norm) of a reference output: computed once, as it is compared with many calls' digests."""
    from kernelevolve.harness.runtime import outside

    if isinstance(ref, Slim):
        return ref.digests, ref.norm
    key = (id(ref), seed)
    if key not in _REF_DIGESTS:
        _REF_DIGESTS[key] = (outside.digests([ref], seed), outside.norm([ref]), ref)  # ref kept: its id stays
    return _REF_DIGESTS[key][:2]


def _check_references(config, n, ref_mod, dtype, device, sync, expected) -> list:
    """References of every trial and repeated call of case n; returns [(name, what, class if it misses)]."""
    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import modules
    from kernelevolve.harness.runtime.correctness import REPEAT_CALLS, repeat_plan

    runs, names = [], []
    for trial in range(config.trials):
        seed = modules.trial_seed(config.seed, n, trial)
        reference = modules.build_reference(ref_mod, seed, dtype, device)
        inputs = modules.make_inputs(ref_mod, seed + 17, dtype, device)
        exp, refs = cmp.reference_outputs(reference, inputs, sync)
        refs = slim(exp, refs, config.seed)
        expected[f"c{n}.t{trial}"] = (exp, refs)
        names.append((f"c{n}.t{trial}", f"trial {trial} (seed {seed})", "incorrect"))
        if _nbytes(inputs) > KEEP_INPUTS_BYTES:  # made again from the seed if a repeated call needs them
            inputs = None
        runs.append((reference, inputs, exp, refs, seed))
    last = runs[-1][0]
    for i, (buffer, values) in enumerate(repeat_plan(len(runs))):
        reference, inputs, exp, refs, seed = runs[values]
        if not _same_model(reference, last):
            if inputs is None:
                inputs = modules.make_inputs(ref_mod, seed + 17, dtype, device)
            exp, refs = cmp.reference_outputs(last, inputs, sync)
            refs = slim(exp, refs, config.seed)
        expected[f"c{n}.r{i}"] = (exp, refs)
        names.append(
            (
                f"c{n}.r{i}",
                f"call {i + 1} of {REPEAT_CALLS} after the trials (input buffer {buffer}, values of trial {values}) "
                f"returned a wrong result",
                "inconsistent",
            )
        )
    for _, inputs, _, _, _ in runs:
        if inputs is not None:
            inputs.clear()  # only the references are needed from here on
    return names


def _pool_references(config, n, ref_mod, dtype, device, sync, expected) -> list:
    """References of a timing process's value sets for case n: [(pool index, ...)]."""
    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import modules

    reference = modules.build_reference(ref_mod, config.seed, dtype, device)
    pools = []
    for k in range(config.input_sets):
        inputs = modules.make_inputs(ref_mod, modules.pool_seed(config.seed, k), dtype, device)
        exp, refs = cmp.reference_outputs(reference, inputs, sync)
        expected[f"c{n}.pool{k}"] = (exp, slim(exp, refs, config.seed))
        for i, ref in enumerate(expected[f"c{n}.pool{k}"][1]):  # the timed calls' digests: the reference's now
            _ref_digests(ref, config.seed + i)
        pools.append(inputs)
    expected[f"c{n}.model"] = (reference, pools)
    return list(range(len(pools)))


def _secret_seeds() -> dict:
    """The outside-timed loops' seeds the evaluator wrote on stdin ({loop name: seed}), or {}."""
    import json
    import sys

    try:
        data = json.loads(sys.stdin.buffer.read() or b"{}")
    except (OSError, ValueError, AttributeError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and type(v) is int} if isinstance(data, dict) else {}


def _loop_plans(config: JudgeConfig, n: int, seeds: dict) -> dict:
    """{loop name: {seed, calls}} of case n known before the timing (seeds from stdin, calls from the prepare
    signal)."""
    from kernelevolve.harness.runtime import outside

    calls = config.outside_calls.get(str(n))
    names = [f"c{n}.{idx}" for idx in range(outside.LOOPS)]
    if type(calls) is not int or calls <= 0 or not all(name in seeds for name in names):
        return {}
    return {name: {"seed": seeds[name], "calls": calls} for name in names}


def _loop_expectation(model_and_pools: tuple, seed: int, calls: int, sync) -> tuple:
    """(seed, calls, the calls drawn, their sums of squares computed with the reference): which calls of a loop
    are recomputed is drawn here, never known to the candidate's process (it runs elsewhere); a loop that
    skipped or cached a quarter of its calls meets one of them with probability > 0.9. The reference runs in
    the case's own dtype (TF32 off): its error in a sum of squares is far inside the sums' width (4 norm
    bounds), and in float32 flash attention's 32 recomputed calls cost ~2 s of the GPU beside the check."""
    import torch

    from kernelevolve.harness.runtime import compare as cmp
    from kernelevolve.harness.runtime import modules, outside

    reference, pools = model_and_pools
    buffer = [x.clone() if isinstance(x, torch.Tensor) else x for x in pools[0]]  # refilled for every call
    sample = sorted(secrets.SystemRandom().sample(range(calls), min(SAMPLE, calls)))
    want = []
    for i in sample:
        xs = outside.call_inputs(pools[i % len(pools)], buffer, seed, i)
        with cmp.exact_float32():
            outs = modules.flatten(cmp.run_model(reference, xs, sync))
        want.append([float(v) for v in outside.sums_of_squares(outs, torch.float64).tolist()])
    return seed, calls, sample, want


def _outside_loops(config: JudgeConfig, n: int, expected: dict, sync) -> str | None:
    """Why case n's outside-timed loops (outside.py) were not all computed, or None: a sample of each loop's
    calls recomputed here with the reference on the same fresh inputs (while preparing, where the
    seeds were known then), and their sums of squares compared."""
    from kernelevolve.harness.runtime import outside

    tol = config.tolerances[config.cases[n].dtype]
    for idx in range(outside.LOOPS):
        loop = config.outside.get(f"c{n}.{idx}")
        if not isinstance(loop, dict):
            return f"outside-timed loop {idx} was never finished"
        got = loop.get("sums")
        if not isinstance(got, list) or len(got) != int(loop["calls"]):
            return f"outside-timed loop {idx}: it reported {len(got) if isinstance(got, list) else 'no'} calls' results"
        seed, calls = int(loop["seed"]), int(loop["calls"])
        known = expected.get(f"c{n}.{idx}")
        if known is None or known[:2] != (seed, calls):  # not known while preparing: drawn and computed now
            known = _loop_expectation(expected[f"c{n}.model"], seed, calls, sync)
        _, _, sample, want = known
        problem = outside.sums_mismatch([got[i] for i in sample], want, tol.norm_bound, calls=sample)
        if problem:
            return f"outside-timed loop ({calls} calls on fresh inputs): {problem}"
    return None


@dataclass(frozen=True)
class Slim:
    """What the judge keeps of a reference output over handover.FULL_BYTES: the values of the blocks the
    candidate's side hands over element by element (handover.sample_blocks, from the same seed) and the
    whole output's digests and norm. Those are all its comparisons read, so a reference of gigabytes is not
    held for the candidate's run (KernelBench's 4096 x 393216 softmaxes: 13 GB each in float64)."""

    blocks: object  # torch.Tensor, 1-D
    digests: list
    norm: float


def slim(expected: list, refs: list, seed: int) -> list:
    """`refs` with each output over handover.FULL_BYTES (at the case's dtype) replaced by its Slim."""
    from kernelevolve.harness.runtime import handover, outside

    kept = []
    for i, (want, ref) in enumerate(zip(expected, refs)):
        blocks = handover.sample_blocks(want.numel(), want.element_size(), seed + i)
        if blocks is None or not ref.is_floating_point():
            kept.append(ref)
            continue
        flat = ref.detach().reshape(-1)
        kept.append(
            Slim(handover.gather_blocks(flat, blocks).clone(), outside.digests([ref], seed + i), outside.norm([ref]))
        )
    return kept


def _nbytes(inputs: list) -> int:
    import torch

    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


KEEP_INPUTS_BYTES = 1 << 30  # a check's inputs up to this size are kept for its repeated calls, else made again
SAMPLE = 8  # calls of each outside-timed loop recomputed with the reference
_REF_DIGESTS: dict[tuple, tuple] = {}
_CALL = re.compile(r"^c(\d+)\.call(\d+)\.(?:digest\.)?json$")


def _kept_calls(folder: str, n: int, pools: list) -> list | str:
    """The timed calls of case n whose outputs the timing process kept, as [(pool name, what, class)],
    or why they cannot be judged. Call i used the values of set (i // S) % P (benchmark.py's plan)."""
    try:
        listed = os.listdir(folder)
    except OSError:
        listed = []
    # A call handed over as bytes has a digest file too (a large output's): each call once.
    calls = sorted({int(m[2]) for f in listed if (m := _CALL.match(f)) and int(m[1]) == n})
    if len(calls) < 2:
        return f"the timing process kept {len(calls)} timed calls' outputs (at least 2 are checked)"
    S = P = len(pools)
    kept = []
    for i in calls[:64]:
        pool = (i // S) % P
        what = f"timed call {i + 1} (input set {i % S}, values {pool})"
        kept.append((f"c{n}.call{i}", what, "incorrect", f"c{n}.pool{pool}"))
    return kept


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
