"""Prompt synthesis: what each prompt carries, and deterministic cutting to the token budget."""

import random

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.operators.budget import Section, estimate_tokens, fit
from kernelevolve.operators.context_builder import PromptBuilder, constructor_signature
from kernelevolve.paths import SPECS
from kernelevolve.spec import load_spec


def _render(s: dict) -> str:
    return "\n".join(f"## {k}\n{v}" for k, v in sorted(s.items()))


def test_cutting_drops_lowest_priority_first_and_keeps_required():
    sections = [
        Section("code", ["x" * 2000], 100, required=True),
        Section("ancestry", [f"- step {i} " + "a" * 90 for i in range(20)], 60, keep="tail"),
        Section("guidance", ["g" * 3000], 30),
    ]
    fitted = fit(sections, _render, budget_tokens=900)
    assert fitted.tokens <= 900
    assert "x" * 2000 in fitted.prompt
    assert "## guidance" not in fitted.prompt  # priority 30 went first, entirely
    assert "- step 19" in fitted.prompt and "- step 0 " not in fitted.prompt  # ancestry keeps its newest entries
    assert "left out to fit the context budget" in fitted.prompt
    assert fitted.cuts[0] == "dropped guidance"


def test_cutting_is_deterministic_and_a_fitting_prompt_is_untouched():
    sections = [Section("a", ["1" * 500, "2" * 500], 10), Section("b", ["3" * 900], 20)]
    assert fit(sections, _render, 200).prompt == fit(list(sections), _render, 200).prompt
    whole = fit(sections, _render, 10_000)
    assert whole.cuts == [] and whole.prompt == _render({"a": "1" * 500 + "\n" + "2" * 500, "b": "3" * 900})
    assert estimate_tokens("abcd" * 10) == 10


def _context(spec, **kw):
    return OperatorContext(spec=spec, run_id="r-test", device="cuda", rng=random.Random(0), **kw)


def _timed(correct=True):
    shapes = [
        ShapeResult(
            label="M=4096,N=512 bfloat16",
            params={"M": 4096, "N": 512},
            dtype="bfloat16",
            correct=True,
            latency_ms=0.0123,
            baseline_ms=0.0246,
            gbps=3400.0,
        ),
        ShapeResult(
            label="M=1024,N=262144 bfloat16",
            params={"M": 1024, "N": 262144},
            dtype="bfloat16",
            correct=True,
            latency_ms=0.8,
            baseline_ms=0.538,
        ),
    ]
    return EvalResult(correct=correct, shapes=shapes, device="cuda", timed=True)


def test_every_prompt_states_the_contract_with_the_reference_constructor():
    spec = load_spec(SPECS / "rmsnorm.yaml")
    assert constructor_signature(spec.reference_source) == "ModelNew(hidden_size: int, eps: float=1e-06)"
    builder = PromptBuilder()
    good = ParentView(3, "class ModelNew: pass\n", "draft", _timed())
    bad = ParentView(4, "class ModelNew: pass\n", "improve", EvalResult.failed("compile", "boom"))
    prompts = [
        builder.draft(spec, _context(spec)).prompt,
        builder.optimise(good, _context(spec)).prompt,
        builder.debug(bad, _context(spec)).prompt,
        builder.crossover(good, bad, _context(spec)).prompt,
    ]
    for prompt in prompts:
        assert "class ModelNew(nn.Module)" in prompt and "ModelNew(hidden_size: int, eps: float=1e-06)" in prompt
        assert "```python" in prompt and spec.reference_source.strip()[:60] in prompt


def test_optimise_prompt_carries_per_shape_timings_and_debug_prompt_the_error():
    spec = load_spec(SPECS / "rmsnorm.yaml")
    builder = PromptBuilder()
    good = ParentView(3, "class ModelNew: pass\n", "draft", _timed())
    opt = builder.optimise(good, _context(spec, insights=["BLOCK 4096 regressed long rows 0.8x"])).prompt
    assert "| M=1024,N=262144 bfloat16 | 0.8000 | 0.5380 | 0.672x |" in opt
    assert "BLOCK 4096 regressed long rows 0.8x" in opt
    failed = EvalResult.failed("runtime", "ValueError: bad grid", log="Traceback ...\nValueError: bad grid (line 42)")
    ancestry = [ParentView(1, "x", "draft", _timed(), note="first draft")]
    dbg = builder.debug(
        ParentView(5, "class ModelNew: pass\n", "improve", failed), _context(spec, ancestry=ancestry)
    ).prompt
    assert "failure class: runtime" in dbg and "ValueError: bad grid (line 42)" in dbg
    assert "#1 draft (first draft): correct" in dbg


def test_knowledge_retrieval_reaches_the_prompt_and_yields_to_the_budget():
    spec = load_spec(SPECS / "rmsnorm.yaml")
    roomy = PromptBuilder(token_budget=100_000, prompt_chars=200_000).draft(spec, _context(spec))
    assert roomy.cuts == []
    assert "(hardware/h200)" in roomy.prompt and "(kernels/rmsnorm)" in roomy.prompt
    default = PromptBuilder(token_budget=100_000).draft(spec, _context(spec))
    # The spec's own kernel and its family's guidance come before the GPU's document.
    assert "(kernels/rmsnorm)" in default.prompt and "(guidance/memory_bound_reductions)" in default.prompt
    assert len(default.prompt) < len(roomy.prompt)
    small = PromptBuilder(token_budget=3000).draft(spec, _context(spec))
    assert small.tokens <= 3000, (small.tokens, small.cuts)  # over budget is never acceptable
    assert small.cuts and "Output contract" in small.prompt and spec.name in small.prompt
    assert spec.reference_source.strip()[:60] in small.prompt  # lower-priority context went first
    again = PromptBuilder(token_budget=3000).draft(spec, _context(spec))
    assert again.prompt == small.prompt
