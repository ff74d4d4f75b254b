"""Prompt synthesis: what each prompt carries, and deterministic cutting to the token budget."""

import random
import statistics
from pathlib import Path

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.operators.budget import Section, estimate_tokens, fit
from kernelevolve.operators.context_builder import (
    PromptBuilder,
    carried_documents,
    constructor_signature,
    usable_insight,
)
from kernelevolve.operators.insights import rule_insight
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


# -- what the prompts carry: constants, timings, documents, size, insights -----------------
PROBLEMS = Path(__file__).parent / "problems"
PARENT = (Path(__file__).parents[1] / "campaign" / "solutions" / "layernorm.py").read_text()
LOG = "\n".join(f'  File "candidate.py", line {i}, in forward\n    y = kernel[grid](x)' for i in range(60))


def test_a_tuple_constant_read_back_as_a_list_builds_its_prompt():
    """Was: `input_shape = (32768,)` with the run's shapes read back from the database (a JSON list)
    raised TypeError: unhashable type: 'list' while building the prompt."""
    spec = load_spec(PROBLEMS / "cumsum.py")
    context = OperatorContext(
        spec=spec, run_id="r", device="interpret", rng=random.Random(0), shapes=[{"batch_size": 4, "input_shape": [80]}]
    )
    prompt = PromptBuilder().draft(spec, context).prompt
    assert "(given with --shape): batch_size=4, input_shape=(80,), dim=1" in prompt


def test_improve_prompts_ask_about_timings_only_when_there_are_some():
    spec = load_spec(SPECS / "rmsnorm.yaml")
    untimed = EvalResult(correct=True, shapes=[ShapeResult(label="M=4", params={}, dtype="bfloat16", correct=True)])
    builder = PromptBuilder()
    cpu = builder.optimise(ParentView(3, "class ModelNew: pass\n", "draft", untimed), _context(spec)).prompt
    gpu = builder.optimise(ParentView(3, "class ModelNew: pass\n", "draft", _timed()), _context(spec)).prompt
    assert "per-shape timings" not in cpu and "it has not been timed (no timings exist yet)" in cpu
    assert "study the per-shape timings against the baseline below" in gpu and "| shape | latency ms |" in gpu
    both_cpu = builder.crossover(
        ParentView(3, "a = 1\n", "draft", untimed), ParentView(4, "b = 2\n", "draft", untimed), _context(spec)
    ).prompt
    assert "where one is faster" not in both_cpu and "neither has been timed" in both_cpu


def test_a_prompt_records_the_documents_it_carried_and_why():
    spec = load_spec(PROBLEMS / "layer_norm.py")
    builder = PromptBuilder()
    prompt = builder.draft(spec, _context(spec)).prompt
    carried = carried_documents(prompt)
    assert [c["ref"] for c in carried] == [p.doc.ref for p in builder.last_selection.picks]
    assert carried[0] == {"ref": "guidance/memory_bound_reductions", "why": carried[0]["why"]}
    assert carried[0]["why"].startswith("family layernorm, score ")
    assert all(f"({c['ref']})" in prompt for c in carried)  # each one's text is there under its heading
    assert carried_documents("# Task: an old prompt without the line\n") == []
    # Cut to a small token budget, the line names only what is left.
    small = builder.__class__(token_budget=3500).draft(spec, _context(spec)).prompt
    assert all(f"({c['ref']})" in small for c in carried_documents(small))


def _kernel_prompts(path: Path) -> list[str]:
    from kernelevolve.campaign.scaling import scaled_shape

    spec = load_spec(path)
    out = []
    for device in ("interpret", "cuda"):
        scaled = scaled_shape(spec.reference_source) if device == "interpret" else None
        shapes = [{k: list(v) if isinstance(v, tuple) else v for k, v in scaled.items()}] if scaled else None

        def context():
            return OperatorContext(spec=spec, run_id="r", device=device, rng=random.Random(0), shapes=shapes)

        builder = PromptBuilder()
        failed = EvalResult.failed("incorrect", "12 of 4096 elements outside atol", log=LOG, device=device)
        passed = EvalResult(correct=True, shapes=[ShapeResult(label="x", params={}, dtype="native", correct=True)])
        out += [
            builder.draft(spec, context()).prompt,
            builder.debug(ParentView(1, PARENT, "draft", failed), context()).prompt,
            builder.optimise(ParentView(2, PARENT, "draft", passed), context()).prompt,
        ]
    return out


def test_kernel_prompts_of_kernelbench_problems_stay_near_24k_characters():
    """Was 27-49k characters (median 34k here, with the same six problems), most of it other families'
    documents."""
    sizes = [len(p) for path in sorted(PROBLEMS.glob("*.py")) for p in _kernel_prompts(path)]
    assert len(sizes) == 36
    assert statistics.median(sizes) <= 24_000 and max(sizes) <= 24_500, sorted(sizes)


def test_tool_errors_never_become_insights():
    spec = load_spec(PROBLEMS / "cumsum.py")
    failed = EvalResult.failed("operator", "operator error: TypeError: unhashable type: 'list'")
    assert rule_insight(spec, ParentView(0, None, "draft", failed), []) is None
    assert not usable_insight("draft #0: FAILED no_code: operator error: TypeError: unhashable type: 'list'")
    assert usable_insight("draft #0: FAILED incorrect at M=4: 3 of 16 elements outside atol")
