"""Prompt synthesis: the context builder fills the jinja2 templates in prompts/.

Sources, in the order a prompt presents them: the parent(s) and their evaluations (for debug,
optimise, crossover), the spec (what it computes, its operator family as read from the
reference, the reference code), the evaluator's contract (operators/contract.py: the checks, the
shapes, the tolerances, generated from the evaluator's own settings), knowledge-base documents
chosen for the operator's family within a character budget (knowledge/select.py), insights from
the context memory and a compact ancestry. A kernel prompt aims at `prompt_chars` characters: the
knowledge budget is what the rest leaves (never under KNOWLEDGE_FLOOR), and every optional section
still yields to the token budget (see budget.py). The output contract is in every prompt.

Each draft of a run is asked for a different approach (DRAFT_APPROACHES) and told what the
earlier drafts did; an improve prompt asks about timings only when the parent was timed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jinja2

from kernelevolve import pysource
from kernelevolve.records.result import EXPLANATIONS
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.operators.budget import Fitted, Section, estimate_tokens, fit
from kernelevolve.spec import Spec

PROMPTS = Path(__file__).parent / "prompts"
LOG_CHARS = 6000  # the log's tail is where the error is

# Priorities of the optional sections (higher survives the budget longer).
PRIORITY = {
    "reference": 95,
    "log": 80,
    "ancestry": 60,
    "insights": 50,
    "hardware": 40,
    "constraints": 35,
    "guidance": 30,
    "kernel": 25,
}
DRAFT_KERNEL_PRIORITY = 70  # with no parent, the closest reference kernel is the best start
PROMPT_CHARS = 24_000  # what a kernel prompt aims at; the knowledge documents fill what the rest leaves
KNOWLEDGE_FLOOR = 2_500  # the knowledge budget when the rest alone is near PROMPT_CHARS (a long parent)

# Each draft of a run starts from another design (index: how many drafts the run asked for before it).
DRAFT_APPROACHES = (
    "the direct design: one program per natural unit of the output (a row, a tile), everything it needs "
    "in registers, as few launches as the data dependencies allow; correct at every shape first, then block "
    "sizes chosen for the GPU shapes",
    "a different decomposition from the direct one: split the largest dimension over more programs (several "
    "programs per row or tile, combined by a second pass or a small kernel), or a persistent grid sized to "
    "the GPU's SMs, so that the GPU shapes fill the machine",
    "the most fused design: one kernel where the reference chains several operations, every intermediate "
    "kept on chip, each input read once",
    "`@triton.autotune` over a few block sizes, warp counts and stages keyed on the size arguments, with "
    "masks so that every configuration is correct at ragged sizes",
)

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(PROMPTS)),
    keep_trailing_newline=True,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(template: str, **values) -> str:
    # Sections may hold code: never reflow what the template was given.
    return _env.get_template(template).render(**values).strip() + "\n"


def system_prompt() -> str:
    return render("system.j2")


def insight_system_prompt() -> str:
    """The insight contract: one or two plain sentences, never code (see insight.j2)."""
    return render("insight_system.j2")


_STORED_CODE = re.compile(r"```|~~~|\bclass ModelNew\b|^\s*(import |from \S+ import |def |@triton)", re.M)
STORED_INSIGHT_MAX_CHARS = 800
# An insight stored about the tool's own failure (before operator errors had their own class): it
# says nothing about kernels, and it came from another problem as often as not.
_TOOL_ERROR = re.compile(r"\boperator error:|FAILED operator\b")


def usable_insight(text: str) -> bool:
    """False for an insight stored before the insight contract was enforced that holds code (or
    is a blob): it would teach a later prompt nothing and cost its budget."""
    text = (text or "").strip()
    return (
        bool(text)
        and not _STORED_CODE.search(text)
        and len(text) <= STORED_INSIGHT_MAX_CHARS
        and not _TOOL_ERROR.search(text)
    )


def fenced(source: str, lang: str = "python") -> str:
    return f"```{lang}\n{source.rstrip()}\n```"


def constructor_signature(reference_source: str) -> str:
    """`ModelNew(dim: int, eps: float = 1e-06)`, from the reference Model's __init__."""
    try:
        tree = pysource.parse(reference_source)
    except SyntaxError:
        return "ModelNew(...)  # same as Model"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    args.args = args.args[1:]  # drop self
                    return f"ModelNew({ast.unparse(args)})"
            return "ModelNew()"
    return "ModelNew(...)  # same as Model"


def spec_summary(spec: Spec, device: str, shapes: list[dict] | None = None, traits=None) -> str:
    """The operator: its name, the family read from the reference, what it computes, the baseline
    and the target. Shapes, dtypes and tolerances are the contract's (operators/contract.py)."""
    from kernelevolve.knowledge.traits import of_spec

    traits = traits if traits is not None else of_spec(spec)
    lines = [f"- name: {spec.name}"]
    if described := traits.describe():
        lines.append(f"- operator family (read from the reference): {described}")
    if spec.description:
        lines.append(f"- what it computes: {spec.description.strip()}")
    lines.append(f"- baseline to beat: {spec.baseline}; target hardware: {spec.hardware}")
    if device == "interpret":
        lines.append(
            "- this search runs under the Triton interpreter on CPU: correctness is checked, speed is not measured"
        )
    return "\n".join(lines)


def _fmt(x: float | None, spec: str = ".4f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def evaluation_summary(view: ParentView) -> str:
    """Failure class, message and failing shapes; or per-shape latency against the baseline."""
    ev = view.evaluation
    if ev is None:
        return "not evaluated"
    lines = []
    if not ev.correct:
        lines.append(f"- failure class: {ev.failure or 'unknown'}")
        if ev.failure in EXPLANATIONS:  # the anti-cheat checks: say what was checked and what is allowed
            lines.append(f"- what this check means: {EXPLANATIONS[ev.failure]}")
        lines.append(f"- message: {ev.message or '(none)'}")
        for s in ev.shapes:
            if s.correct is False:
                err = f"; max abs err {s.max_abs_err:.3g}" if s.max_abs_err is not None else ""
                rel = f", rel err {s.max_rel_err:.3g}" if s.max_rel_err is not None else ""
                lines.append(
                    f"- shape {s.label}: {s.failure or 'wrong'}{err}{rel}" + (f" ({s.message})" if s.message else "")
                )
        return "\n".join(lines)
    if not ev.timed:
        lines.append(f"- correct at all {len(ev.shapes)} shapes (device {ev.device}: not timed)")
        lines += static_lines(ev.static)
    else:
        lines.append(
            f"- correct at all {len(ev.shapes)} shapes; fitness (geometric-mean speedup over the baseline) {_fmt(ev.fitness, '.3f')}x"
        )
        lines.append("")
        lines.append("| shape | latency ms | baseline ms | speedup | GB/s | TFLOP/s |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for s in ev.shapes:
            lines.append(
                f"| {s.label} | {_fmt(s.latency_ms)} | {_fmt(s.baseline_ms)} | {_fmt(s.speedup, '.3f')}x "
                f"| {_fmt(s.gbps, '.0f')} | {_fmt(s.tflops, '.1f')} |"
            )
    profile = view.profile
    if profile:
        lines += ["", "Profile summary:", str(profile).strip()[:3000]]
    return "\n".join(lines)


def static_lines(static: dict | None) -> list[str]:
    """The static estimate of an untimed candidate (evaluation/static_cost.py), for the model: what it
    is made of, and that it is not a timing."""
    if not static:
        return []
    if static.get("cost") is None:
        return [f"- static estimate: none ({static.get('error', 'unknown reason')})"]
    lines = [
        f"- static estimate (its kernels compiled for {static.get('target', 'the GPU')} without running them, and "
        f"its loads and stores counted at {static.get('shape') or 'the smallest shape'}; not a timing): "
        f"est. cost {static['cost']:.2f}, where 1.0 is one launch moving the minimal bytes at good occupancy "
        "without spills; lower is better, and candidates are chosen by it until a GPU times them",
        f"- per call: {static.get('launches')} launch(es), {static.get('bytes', 0)} bytes moved against "
        f"{static.get('minimal_bytes', 0):.0f} minimal ({static.get('minimal_from', '')})",
    ]
    for name, k in (static.get("kernels") or {}).items():
        if k.get("error"):
            lines.append(f"- kernel {name}: {k['error']}")
            continue
        facts = [f"num_warps {k.get('num_warps')}", f"num_stages {k.get('num_stages')}"]
        if k.get("registers") is not None:
            facts.append(f"{k['registers']} registers/thread")
        facts.append(f"{k.get('spill_bytes', 0)} bytes spilled")
        facts.append(f"{k.get('shared_bytes', 0)} bytes shared memory")
        if k.get("occupancy") is not None:
            facts.append(f"occupancy {k['occupancy']:.0%} of an SM's warps")
        if k.get("tensor_core"):
            facts.append("tensor-core MMA")
        lines.append(f"- kernel {name}: " + ", ".join(facts))
    return lines


def ancestry_line(view: ParentView) -> str:
    ev = view.evaluation
    if ev is None:
        outcome = "not evaluated"
    elif not ev.correct:
        outcome = f"FAILED {ev.failure}: {ev.message[:160]}"
    elif ev.fitness:
        outcome = f"correct, {ev.fitness:.3f}x"
    elif ev.static and ev.static.get("cost") is not None:
        outcome = f"correct (untimed; static est. cost {ev.static['cost']:.2f}, lower is better)"
    else:
        outcome = "correct (untimed)"
    note = f" ({view.note})" if view.note else ""
    return f"- #{view.node_id} {view.kind}{note}: {outcome}"


CARRIED = "Knowledge-base documents below, and why each was chosen: "
_CARRIED_ITEM = re.compile(r"([a-z]+/[\w.-]+) \(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def carried_documents(prompt: str) -> list[dict]:
    """The knowledge-base documents a stored prompt carried and why, read back from the prompt's
    own record line: [{"ref": "guidance/memory_bound_reductions", "why": "family layernorm, score
    32.9"}, ...]; [] for a prompt that carried none (or was written before the line existed)."""
    for line in (prompt or "").splitlines():
        if line.startswith(CARRIED):
            body = line[len(CARRIED) :]
            return [{"ref": m.group(1), "why": m.group(2)} for m in _CARRIED_ITEM.finditer(body)]
    return []


def node_documents(repo, run_id: str, node_id: int) -> list[dict]:
    """The knowledge-base documents the kernel prompt that made node `node_id` of run `run_id`
    carried, and why (`carried_documents` of its model call's stored prompt; a node with several
    calls, its last kernel prompt's); [] for a node made without a model (offline) or by an older
    version. For `kernelevolve show RUN --node N`."""
    prompts = [c.prompt for c in repo.llm_calls(run_id) if c.node_id == node_id and c.prompt.startswith("# Task:")]
    return carried_documents(prompts[-1]) if prompts else []


def draft_approach(index: int) -> str:
    """The design a run's `index`-th draft is asked to take (they differ, then repeat)."""
    return DRAFT_APPROACHES[index % len(DRAFT_APPROACHES)]


def earlier_drafts(context: OperatorContext) -> list[str]:
    """What this run's earlier drafts did (their `Change:` line and outcome), oldest first."""
    return [ancestry_line(v) for v in context.evaluated if v.kind == "draft"]


class PromptBuilder:
    def __init__(self, token_budget: int = 24000, knowledge=None, prompt_chars: int = PROMPT_CHARS):
        self.token_budget = token_budget
        self.prompt_chars = prompt_chars
        self._knowledge = knowledge
        self.last_selection = None  # the knowledge selection of the latest prompt (for tests and tools)

    def _kb(self):
        kb = self._knowledge
        if kb is None:
            from kernelevolve.knowledge import KnowledgeBase, KnowledgeError

            try:
                kb = self._knowledge = KnowledgeBase.load()
            except KnowledgeError:
                return None  # prompts work without the knowledge base, only less well
        return kb

    def _kb_sections(
        self, spec: Spec, draft: bool, device: str, budget_chars: int, traits
    ) -> tuple[list[Section], object]:
        kb = self._kb()
        if kb is None:
            return [], None
        found = kb.select(spec, budget_chars=budget_chars, draft=draft, device=device, traits=traits)
        out = []
        if found.picks:
            out.append(Section("carried", [CARRIED + found.carried()], PRIORITY["hardware"] + 5))
        hardware = found.of_kind("hardware")
        if hardware:
            out.append(Section("hardware", [hardware[0].text], PRIORITY["hardware"]))
        out.append(
            Section(
                "constraints", [d.text for d in found.of_kind("constraints")], PRIORITY["constraints"], joiner="\n\n"
            )
        )
        out.append(
            Section("guidance", [d.text for d in found.of_kind("guidance")], PRIORITY["guidance"], joiner="\n\n")
        )
        kernels = found.of_kind("kernels")
        if kernels:
            priority = DRAFT_KERNEL_PRIORITY if draft else PRIORITY["kernel"]
            out.append(Section("kernel", [d.text for d in kernels], priority, joiner="\n\n"))
        return out, found

    def _common(self, spec: Spec, context: OperatorContext, exclude: set[int], traits) -> list[Section]:
        from kernelevolve.operators.contract import evaluator_contract

        sections = [
            Section("spec", [spec_summary(spec, context.device, context.shapes, traits)], 100, required=True),
            Section("checks", [evaluator_contract(spec, context.device, context.shapes)], 100, required=True),
            Section("reference", [fenced(spec.reference_source)], PRIORITY["reference"]),
            Section(
                "insights", [f"- {i.strip()}" for i in context.insights if usable_insight(i)], PRIORITY["insights"]
            ),
            Section(
                "ancestry",
                [ancestry_line(v) for v in context.ancestry if v.node_id not in exclude],
                PRIORITY["ancestry"],
                keep="tail",
            ),
        ]
        from kernelevolve.languages import prompt_lines

        if lines := prompt_lines(spec.languages, context.device):  # a spec allowing more than Triton
            sections.append(Section("languages", [f"- {line}" for line in lines], 100, required=True))
        return sections

    def _fit(
        self,
        template: str,
        sections: list[Section],
        spec: Spec,
        context: OperatorContext,
        draft: bool,
        traits,
        **values,
    ) -> Fitted:
        ctor = constructor_signature(spec.reference_source)

        def render_with(s: dict[str, str]) -> str:
            return render(template, s=s, spec_name=spec.name, ctor=ctor, **values)

        # The knowledge budget: what the prompt without documents leaves of prompt_chars (at least
        # KNOWLEDGE_FLOOR), per kernel language; the documents' headings and the record line come on
        # top, so a second selection takes off what the first overran.
        rest = len(render_with({x.name: x.text for x in sections if x.items}))
        languages = max(1, len(getattr(spec, "languages", None) or ["triton"]))
        budget = max(KNOWLEDGE_FLOOR, self.prompt_chars - rest) * languages
        target = rest + budget
        for _ in range(3):
            knowledge, selection = self._kb_sections(spec, draft, context.device, budget, traits)
            fitted = fit(sections + knowledge, render_with, self.token_budget)
            over = len(fitted.prompt) - target
            if over <= 0 or selection is None or not selection.picks:
                break
            budget = selection.used_chars - over
        self.last_selection = selection
        if selection is not None and selection.picks and fitted.cuts:
            # A document cut to fit the token budget is no longer carried: the record line says so.
            kept = [p for p in selection.picks if f"({p.doc.ref})" in fitted.prompt]
            line = CARRIED + selection.carried()
            if kept != selection.picks and line in fitted.prompt:
                selection.picks = kept
                fitted.prompt = fitted.prompt.replace(line, CARRIED + selection.carried() if kept else "")
                fitted.tokens = estimate_tokens(fitted.prompt)
        return fitted

    @staticmethod
    def _traits(spec: Spec):
        from kernelevolve.knowledge.traits import of_spec

        return of_spec(spec)

    # -- the four prompts -----------------------------------------------------------------
    def draft(self, spec: Spec, context: OperatorContext, index: int = 0) -> Fitted:
        """The `index`-th draft of the run: its own approach, and what the earlier drafts did."""
        traits = self._traits(spec)
        sections = self._common(spec, context, set(), traits)
        sections.append(Section("drafts", earlier_drafts(context), PRIORITY["ancestry"], keep="tail"))
        return self._fit(
            "draft.j2", sections, spec, context, True, traits, approach=draft_approach(index), draft_number=index + 1
        )

    def debug(self, parent: ParentView, context: OperatorContext) -> Fitted:
        spec = context.spec
        traits = self._traits(spec)
        sections = self._common(spec, context, {parent.node_id}, traits)
        sections.append(Section("parent", [fenced(parent.source or "# (the reply held no code)")], 100, required=True))
        sections.append(Section("evaluation", [evaluation_summary(parent)], 100, required=True))
        log = (parent.evaluation.log if parent.evaluation else "") or ""
        if log.strip():
            sections.append(Section("log", log.strip()[-LOG_CHARS:].splitlines(), PRIORITY["log"], keep="tail"))
        return self._fit("debug.j2", sections, spec, context, False, traits, parent_id=parent.node_id)

    def optimise(self, parent: ParentView, context: OperatorContext) -> Fitted:
        spec = context.spec
        traits = self._traits(spec)
        sections = self._common(spec, context, {parent.node_id}, traits)
        sections.append(Section("parent", [fenced(parent.source or "")], 100, required=True))
        sections.append(Section("evaluation", [evaluation_summary(parent)], 100, required=True))
        timed = bool(parent.evaluation is not None and parent.evaluation.timed)
        estimated = bool(not timed and parent.evaluation is not None and (parent.evaluation.static or {}).get("cost"))
        return self._fit(
            "optimise.j2",
            sections,
            spec,
            context,
            False,
            traits,
            parent_id=parent.node_id,
            timed=timed,
            estimated=estimated,
            profiled=bool(parent.profile),
        )

    def crossover(self, a: ParentView, b: ParentView, context: OperatorContext) -> Fitted:
        spec = context.spec
        traits = self._traits(spec)
        sections = self._common(spec, context, {a.node_id, b.node_id}, traits)
        sections += [
            Section("parent", [fenced(a.source or "")], 100, required=True),
            Section("evaluation", [evaluation_summary(a)], 100, required=True),
            Section("other", [fenced(b.source or "")], 100, required=True),
            Section("other_evaluation", [evaluation_summary(b)], 100, required=True),
        ]
        timed = all(v.evaluation is not None and v.evaluation.timed for v in (a, b))
        return self._fit(
            "crossover.j2", sections, spec, context, False, traits, parent_id=a.node_id, other_id=b.node_id, timed=timed
        )
