"""The verdict is the judge's: a process that never imports the candidate compares the outputs the
candidate's process handed over (as bytes) with the reference it computes itself. Real sandboxed
processes under the Triton interpreter; the screen is off where the candidate attacks the process it
runs in, since the point is what holds when the screen is passed."""

from pathlib import Path

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.harness.runtime import compare
from kernelevolve.harness.runtime.configs import Case, JudgeConfig, Tolerance
from kernelevolve.spec import load_spec

HERE = Path(__file__).parent
KERNELS = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rows_softmax(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, ZERO: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    s = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
        y = tl.exp(x - m) / s * scale
        if ZERO:
            y = y * 0.0
        tl.store(y_ptr + row * n + offs, y, mask=offs < n)


def softmax(x, zero=False, scale=1.0):
    y = torch.empty_like(x)
    rows_softmax[(x.shape[0],)](x, y, x.shape[1], scale, BLOCK=16384, ZERO=zero)
    return y

"""


def _candidate(forward: str, head: str = "") -> str:
    return head + KERNELS + "class ModelNew(nn.Module):\n    def forward(self, x):\n" + forward


@pytest.fixture(scope="module")
def long_softmax():
    return load_spec(HERE / "fixtures" / "long_softmax.py")


def _evaluate(spec, source, **kw):
    kw.setdefault("timeout_s", 120)
    return Evaluator(device="interpret", trials=2, **kw).evaluate(spec, source)


def test_an_all_zero_softmax_over_a_long_row_is_incorrect(long_softmax):
    """Every value of the right answer is ~2.5e-6, under float32's atol of 1e-3: elementwise, zeros pass."""
    honest = _evaluate(long_softmax, _candidate("        return softmax(x)\n"))
    assert honest.correct, honest.message
    zeros = _evaluate(long_softmax, _candidate("        return softmax(x, zero=True)\n"))
    assert (zeros.correct, zeros.failure) == (False, "incorrect")
    assert "the output as a whole is off" in zeros.message and "||out - ref|| / ||ref|| = 1 " in zeros.message


def test_an_output_right_on_the_first_call_and_off_later_is_incorrect(long_softmax):
    """Every checked call is compared element by element and as a whole: 1% off on every call after the
    first (ten norm bounds) passed when the later calls were handed over as digests only (whose width is
    12 norm bounds), as a held-out candidate showed."""
    later = _evaluate(
        long_softmax,
        _candidate(
            "        calls.append(1)\n        return softmax(x, scale=1.0 if len(calls) == 1 else 1.01)\n",
            head="calls = []\n",
        ),
    )
    assert (later.correct, later.failure) == (False, "incorrect"), later.message
    assert "trial 1" in later.message and "the output as a whole is off" in later.message


def test_the_norm_rule_fails_zero_constant_and_partly_written_outputs_at_any_shape():
    import torch

    tol = Tolerance(atol=1e-3, rtol=1e-3)
    for n in (10, 1000, 393216):
        ref = torch.softmax(torch.randn(2, n, dtype=torch.float64), dim=1)
        meta = [ref.to("meta").float()]
        right = compare.compare([ref.float()], meta, [ref], tol)
        assert right[0], (n, right[1])
        for wrong in (torch.zeros_like(ref), torch.full_like(ref, 1.0 / n), ref * (torch.arange(n) < n * 0.9)):
            ok, message, _, rel = compare.compare([wrong.float()], meta, [ref], tol)
            assert not ok and rel > 1e-3, (n, message)


def test_a_candidate_that_rewrites_the_comparison_in_its_own_process_is_still_judged(long_softmax):
    """Screen off: the candidate replaces the harness's comparison and the tensors' equality inside its
    process and returns zeros. The judge, in another process, was never reachable."""
    hostile = _candidate(
        "        return softmax(x, zero=True)\n",
        head=(
            "import sys\n"
            "for name, mod in list(sys.modules.items()):\n"
            "    if name.startswith('kernelevolve'):\n"
            "        for attr in ('compare', 'allclose', 'finish'):\n"
            "            if hasattr(mod, attr) and attr == 'compare':\n"
            "                setattr(mod, attr, lambda *a, **k: (True, '', 0.0, 0.0))\n"
        ),
    )
    result = _evaluate(long_softmax, hostile, screen=False)
    assert (result.correct, result.failure) == (False, "incorrect"), result.message


def test_a_tensor_subclass_output_is_not_a_result(long_softmax):
    """Its __torch_function__ answers every op (the comparison's too) as it likes; what reaches the
    judge is bytes, and the candidate's own process refuses it first."""
    hostile = _candidate(
        "        return Liar(softmax(x, zero=True))\n",
        head=(
            "import torch\n\n"
            "class Liar(torch.Tensor):\n"
            "    @classmethod\n"
            "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
            "        return torch.zeros(()) if func.__name__ in ('sub', 'abs', 'max') else super().__torch_function__(func, types, args, kwargs or {})\n\n"
        ),
    )
    result = _evaluate(long_softmax, hostile, screen=False)
    assert not result.correct and result.failure == "incorrect", (result.failure, result.message)
    assert "not a plain torch.Tensor" in result.message


def test_forged_output_files_are_judged_as_what_they_hold(long_softmax):
    """Screen off: the candidate's process writes the handover itself (zeros, a wrong shape, a link);
    the judge reads bytes, checks them against the manifest, and compares."""
    hostile = _candidate(
        "        out = softmax(x)\n"
        "        import kernelevolve.harness.runtime.handover as h\n"
        "        real = h.write_outputs\n"
        "        h.write_outputs = lambda folder, name, outs, seed=0: real(folder, name, [torch.zeros_like(o) for o in outs], seed)\n"
        "        return out\n"
    )
    result = _evaluate(long_softmax, hostile, screen=False)
    assert (result.correct, result.failure) == (False, "incorrect"), result.message


def test_processes_that_together_hold_more_than_the_limit_are_killed(long_softmax):
    """Each child stays under the per-process limit; together they pass the evaluation's."""
    hostile = _candidate(
        "        import os, time\n"
        "        for _ in range(4):\n"
        "            if os.fork() == 0:\n"
        "                block = bytearray(700 << 20)\n"
        "                time.sleep(60)\n"
        "        time.sleep(60)\n"
        "        return softmax(x)\n"
    )
    result = _evaluate(long_softmax, hostile, screen=False, max_memory_bytes=2 << 30)
    assert result.failure == "crash", result.message
    assert "together held" in result.message and "limit of 2.0 GiB" in result.message


def test_an_outside_timed_loop_that_skips_or_caches_calls_fails_the_judges_check():
    """The loop's per-call sums of squares, recomputed by the judge on the same fresh inputs: an honest
    loop matches; one that computes the first call and hands back its output after that does not."""
    import torch

    from kernelevolve.harness.runtime import outside

    g = torch.Generator().manual_seed(7)  # inputs fixed: not whatever the worker's global generator holds
    pool = [[torch.randn(64, 300, generator=g) * 3], [torch.randn(64, 300, generator=g) * 3]]
    buffers = [[p[0].clone()] for p in pool]
    seed, calls = 12345, 12
    cache = {}

    def honest(x):
        return torch.softmax(x, dim=1)

    def caching(x):
        return cache.setdefault("out", torch.softmax(x, dim=1))

    want = []
    for i in range(calls):  # the judge's side
        xs = outside.call_inputs(pool[i % 2], [b[0].clone() for b in [buffers[i % 2]]], seed, i)
        want.append([float(v) for v in outside.sums_of_squares([torch.softmax(xs[0].double(), dim=1)], torch.float64)])
    flat = lambda out: [out]  # noqa: E731
    got = outside.run_loop(honest, pool, buffers, seed, calls, lambda: None, flat)
    assert outside.sums_mismatch(got, want, 1e-3) is None
    cheated = outside.run_loop(caching, pool, buffers, seed, calls, lambda: None, flat)
    assert "call 2:" in outside.sums_mismatch(cheated, want, 1e-3)
    assert "call 9:" in outside.sums_mismatch(cheated[1:], want[1:], 1e-3, calls=list(range(8, 19)))
    assert outside.sums_mismatch(got[:-1], want, 1e-3).startswith("it reported 11 calls")


def test_the_timed_judge_checks_loops_it_computed_while_preparing_and_others_afresh():
    """With the loops' seeds known while preparing (from the evaluator, on stdin), the judge draws and
    computes its sample then; at the verdict an honest loop passes and a caching one fails either way, and a
    loop released with another seed or call count than planned is checked with a sample computed afresh."""
    import torch

    from kernelevolve.harness.runtime import judge, modules, outside

    class Softmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)

    pools = [[torch.randn(64, 300)], [torch.randn(64, 300)]]
    config = JudgeConfig(
        device="interpret",
        mode="timed",
        reference_path="reference.py",
        outputs_dir="outputs",
        result_path="result.json",
        cases=(Case("softmax", {}, "float32"),),
        tolerances={"float32": Tolerance(atol=1e-5, rtol=1e-5, norm_rtol=1e-4)},
        trials=1,
        seed=0,
    ).signalled({"outside_calls": {"0": 12}})  # as the evaluator's prepare signal gives them
    plans = judge._loop_plans(config, 0, {"c0.0": 11, "c0.1": 22})
    assert plans == {"c0.0": {"seed": 11, "calls": 12}, "c0.1": {"seed": 22, "calls": 12}}
    assert judge._loop_plans(config, 0, {"c0.0": 11}) == {}  # a seed missing: nothing planned
    assert judge._loop_plans(config, 1, {"c1.0": 1, "c1.1": 2}) == {}  # no call count known for case 1
    expected = {"c0.model": (Softmax(), pools)}
    for name, plan in plans.items():
        expected[name] = judge._loop_expectation(expected["c0.model"], plan["seed"], plan["calls"], None)
    assert len(expected["c0.0"][2]) == judge.SAMPLE and expected["c0.0"][:2] == (11, 12)

    def loops(fn, seeds=(11, 22), calls=12) -> dict:
        buffers = [[p[0].clone()] for p in pools]
        return {
            f"c0.{i}": {
                "seed": s,
                "calls": calls,
                "sums": outside.run_loop(fn, pools, buffers, s, calls, lambda: None, modules.flatten),
            }
            for i, s in enumerate(seeds)
        }

    cache = {}
    honest = Softmax()
    caching = lambda x: cache.setdefault("out", torch.softmax(x, dim=1))  # noqa: E731
    assert judge._outside_loops(config.signalled({"outside": loops(honest)}), 0, expected, None) is None
    assert "a call not computed" in judge._outside_loops(
        config.signalled({"outside": loops(caching)}), 0, expected, None
    )
    other = config.signalled({"outside": loops(honest, seeds=(33, 44), calls=10)})  # not as planned: sampled afresh
    assert judge._outside_loops(other, 0, expected, None) is None
    cache.clear()
    other = config.signalled({"outside": loops(caching, seeds=(33, 44), calls=10)})
    assert "a call not computed" in judge._outside_loops(other, 0, expected, None)


def test_the_evaluators_interpreter_rounds_tf32_dots_as_the_gpu_does(tmp_path):
    """A float32 tl.dot at its default precision (tf32) is off by ~1e-4 relative in the evaluator's processes,
    as on the GPU; with input_precision="ieee" it is exact to float32."""
    import subprocess
    import sys

    script = tmp_path / "dot.py"
    script.write_text(
        "import os\nos.environ['TRITON_INTERPRET'] = '1'\n"
        "import torch, triton, triton.language as tl\n"
        "from kernelevolve.evaluation.interpreter_compat import emulate_tf32, patch_triton_interpreter\n"
        "patch_triton_interpreter(); emulate_tf32()\n"
        "@triton.jit\ndef k(a, b, c, IEEE: tl.constexpr):\n"
        "    o = tl.arange(0, 32)\n"
        "    x = tl.load(a + o[:, None] * 32 + o[None, :]); y = tl.load(b + o[:, None] * 32 + o[None, :])\n"
        "    z = tl.dot(x, y, input_precision='ieee') if IEEE else tl.dot(x, y)\n"
        "    tl.store(c + o[:, None] * 32 + o[None, :], z)\n"
        "a, b, c = torch.randn(32, 32), torch.randn(32, 32), torch.empty(32, 32)\n"
        "ref = a.double() @ b.double()\n"
        "for ieee in (0, 1):\n"
        "    k[(1,)](a, b, c, ieee); print(((c.double() - ref).norm() / ref.norm()).item())\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout.split()
    tf32, ieee = float(out[0]), float(out[1])
    assert 2e-5 < tf32 < 2e-3 and ieee < 1e-6, (tf32, ieee)


@pytest.mark.parametrize("slimmed", [False, True], ids=["whole reference", "slim reference"])
def test_a_large_output_is_judged_on_sampled_blocks_and_as_a_whole(tmp_path, monkeypatch, slimmed):
    """Over handover.FULL_BYTES an output is handed over as a sample of its blocks (edges always) plus digests:
    a wrong edge element fails element by element, a wrong output outside the sample fails as a whole, and a
    right one passes with its max error measured on the sample. The judge keeps only the reference's sampled
    blocks, digests and norm (`judge.slim`: a few percent of it) and reaches the same verdicts."""
    import torch

    from kernelevolve.harness.runtime import handover, judge

    monkeypatch.setattr(handover, "FULL_BYTES", 4096)
    monkeypatch.setattr(handover, "BLOCK", 64)
    ref = torch.randn(300, 257, dtype=torch.float64)  # 77100 elements: 1205 blocks, the last one ragged
    exp, tol, seed = [ref.to(torch.float32).to("meta")], Tolerance(atol=1e-5, rtol=1e-4), 99
    blocks = handover.sample_blocks(ref.numel(), 4, seed)
    assert blocks[:4] == [0, 1, 2, 3] and blocks[-1] == 1204 and 60 < len(blocks) < 1205 // 8

    refs = judge.slim(exp, [ref], seed) if slimmed else [ref]
    if slimmed:
        assert isinstance(refs[0], judge.Slim) and refs[0].blocks.numel() < ref.numel() / 8

    def verdict(out, name):
        folder = str(tmp_path / name)
        handover.write_outputs(folder, name, [out], seed)
        return judge._judge_one(folder, name, exp, refs, tol, "cpu", seed)

    right = ref.to(torch.float32)
    ok, message, abs_err, _ = verdict(right, "right")
    assert ok and message == "" and abs_err < 1e-6
    tail = right.clone()
    tail.view(-1)[-1] += 1.0  # the ragged last block is always in the sample
    ok, message, _, _ = verdict(tail, "tail")
    assert not ok and "1 of" in message and "elements outside" in message
    outside_sample = next(b for b in range(4, 1200) if b not in blocks)
    half = right.clone()
    half.view(-1)[outside_sample * 64 :] *= 0.5  # off as a whole, and mostly outside the sample's blocks
    half.view(-1)[[b * 64 + k for b in blocks for k in range(64) if b * 64 + k < ref.numel()]] = right.view(-1)[
        [b * 64 + k for b in blocks for k in range(64) if b * 64 + k < ref.numel()]
    ]
    ok, message, _, _ = verdict(half, "half")
    assert not ok and "digest" in message


def test_a_timed_calls_outputs_are_judged_element_by_element_and_each_call_once(tmp_path, monkeypatch):
    """The timing process hands over a kept timed call's outputs as a checked call's (benchmark.py): a large
    output's sampled blocks and its digests, two files of one call that the timed judge lists once. One
    element off just beyond the tolerance, in the first block, is `incorrect` with its numbers; as digests
    alone (the whole output's check) it would have passed."""
    import os

    import torch

    from kernelevolve.harness.runtime import handover, judge

    monkeypatch.setattr(handover, "FULL_BYTES", 4096)
    monkeypatch.setattr(handover, "BLOCK", 64)
    folder, seed = str(tmp_path), 5
    ref = torch.rand(512, 256, dtype=torch.float64)
    right = ref.to(torch.float32)
    bumped = right.clone()
    bumped.view(-1)[0] += 1e-3  # rtol 1e-4 of a value under 1: just outside
    for call, out in ((3, right), (7, bumped)):
        handover.write_outputs(folder, f"c0.call{call}", [out], seed)
    assert {f for f in os.listdir(folder) if f.endswith("json")} == {
        "c0.call3.json",
        "c0.call3.digest.json",
        "c0.call7.json",
        "c0.call7.digest.json",
    }
    kept = judge._kept_calls(folder, 0, ["c0.pool0"])
    assert [name for name, *_ in kept] == ["c0.call3", "c0.call7"]
    exp, tol = [right.to("meta")], Tolerance(atol=1e-7, rtol=1e-4)
    assert judge._judge_one(folder, "c0.call3", exp, [ref], tol, "cpu", seed)[0]
    ok, message, abs_err, _ = judge._judge_one(folder, "c0.call7", exp, [ref], tol, "cpu", seed)
    assert not ok and "1 of" in message and abs_err == pytest.approx(1e-3, rel=1e-3), message
    handover.write_digests(folder, "digests_only", [bumped], seed)
    assert judge._judge_digests(folder, "digests_only", exp, [ref], tol, seed)[0]  # what a digest cannot see


@pytest.mark.parametrize("wrong", [None, "timed call", "loop"])
def test_the_timed_judge_run_as_the_evaluator_runs_it(tmp_path, wrong):
    """The timed judge (as on a GPU, here on the interpreter) in its sandboxed process, told by its typed
    configuration and the evaluator's signals: honest timed calls and loops pass; one wrong timed call, or a
    loop whose sums were not computed, fails it as `incorrect`."""
    import json
    import shutil

    import torch

    from kernelevolve.evaluation.sandbox import Limits, clean_environment, run_script
    from kernelevolve.harness import render
    from kernelevolve.harness.runtime import handover, modules, outside
    from kernelevolve.harness.runtime.report import CheckCase, Report

    spec = load_spec(HERE.parents[1] / "specs" / "softmax.yaml")
    case = spec.cases("interpret")[0]
    shutil.copy(spec.reference, tmp_path / "reference.py")
    folder, outputs = tmp_path / "judge", tmp_path / "outputs"
    folder.mkdir()
    outputs.mkdir()
    seed = 11
    config = JudgeConfig(
        device="interpret",
        mode="timed",
        reference_path=str(tmp_path / "reference.py"),
        outputs_dir=str(outputs),
        cases=(Case(case.label, dict(case.params), case.dtype),),
        tolerances={case.dtype: Tolerance(**spec.tolerance(case.dtype).model_dump())},
        trials=1,
        seed=seed,
    ).with_signals(result_path=str(folder / "result.json"), go_path=str(folder / "go"), stop_path=str(folder / "stop"))
    # What the candidate's timing process hands over: its kept timed calls, and its outside loops' sums.
    ref_mod = modules.load_module(str(tmp_path / "reference.py"), "timed_reference", case.params)
    dtype = modules.dtype_of(config.cases[0])
    model = modules.build_reference(ref_mod, seed, dtype, "cpu")
    pools = [modules.make_inputs(ref_mod, modules.pool_seed(seed, k), dtype, "cpu") for k in range(2)]
    for i in range(4):
        with torch.no_grad():
            out = model(*pools[(i // 2) % 2])
        if wrong == "timed call" and i == 3:
            out = out.flip(-1)
        handover.write_outputs(str(outputs), f"c0.call{i}", [out], seed)
    fn = model if wrong != "loop" else (lambda *xs: model(*pools[0]))  # a loop that ignores its inputs
    loops = {}
    for idx, loop_seed in enumerate((101, 202)):
        buffers = [[x.clone() for x in pool] for pool in pools]
        with torch.no_grad():
            sums = outside.run_loop(fn, pools, buffers, loop_seed, 8, lambda: None, modules.flatten)
        loops[f"c0.{idx}"] = {"seed": loop_seed, "calls": 8, "sums": sums}
    (folder / "go").write_text(json.dumps({"outside": loops}))  # the evaluator's go, with what it relays
    env = clean_environment({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    outcome = run_script(
        render("judge", config), folder, limits=Limits(timeout_s=120), env=env, result_path=folder / "result.json"
    )
    report = outcome.report(CheckCase)
    assert report.done, outcome.stderr[-2000:]
    [verdict] = report.cases
    if wrong is None:
        assert report.failure is None and verdict.correct is True, verdict
    else:
        assert report.failure.failure_class == "incorrect" and verdict.correct is False
        assert ("timed call 4" if wrong == "timed call" else "outside-timed loop") in verdict.message
    assert Report.read(outcome.result, CheckCase) == report
