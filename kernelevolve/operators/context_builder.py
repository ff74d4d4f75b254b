"""Prompt synthesis: the context builder fills the jinja2 templates in prompts/.

Sources, in the order a prompt presents them: the parent(s) and their evaluations (for debug,
optimise, crossover), the spec (description, shapes, dtypes, tolerances, hardware, reference
code), knowledge-base retrieval (hardware document, constraints, guidance, closest reference
kernel), insights from the context memory and a compact ancestry. Everything optional competes
for the token budget (see budget.py); the output contract is in every prompt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jinja2

from kernelevolve.evaluation.result import EXPLANATIONS
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.operators.budget import Fitted, Section, fit
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


def usable_insight(text: str) -> bool:
    """False for an insight stored before the insight contract was enforced that holds code (or
    is a blob): it would teach a later prompt nothing and cost its budget."""
    text = (text or "").strip()
    return bool(text) and not _STORED_CODE.search(text) and len(text) <= STORED_INSIGHT_MAX_CHARS


def fenced(source: str, lang: str = "python") -> str:
    return f"```{lang}\n{source.rstrip()}\n```"


def constructor_signature(reference_source: str) -> str:
    """`ModelNew(dim: int, eps: float = 1e-06)`, from the reference Model's __init__."""
    try:
        tree = ast.parse(reference_source)
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


def spec_summary(spec: Spec, device: str, shapes: list[dict] | None = None) -> str:
    """The operator as the search evaluates it: the shapes actually used (`--shape` ones when
    given, with the module constants they resolve to), dtypes, tolerances, baseline, device."""
    from kernelevolve.shapes import constants
    from kernelevolve.spec import format_value, shape_text

    lines = [f"- name: {spec.name}" + (f" (family: {spec.family})" if spec.family else "")]
    if spec.description:
        lines.append(f"- what it computes: {spec.description.strip()}")
    shown = list(dict.fromkeys(shape_text(c.params) for c in spec.cases(device, shapes)))
    origin = (
        "given with --shape"
        if shapes
        else ("the spec's interpret_shapes" if device == "interpret" and spec.interpret_shapes else "the spec's shapes")
    )
    lines.append(f"- shapes evaluated (module constants, {origin}): {'; '.join(shown)}")
    try:
        base = constants(spec.reference_source)
        resolved = []
        for params in dict.fromkeys(tuple(c.params.items()) for c in spec.cases(device, shapes)):
            values = constants(spec.reference_source, dict(params))
            resolved.append(
                ", ".join(
                    f"{k}={format_value(v)}"
                    for k, v in values.items()
                    if isinstance(v, (int, float, tuple, list)) and not isinstance(v, bool)
                )
            )
        if base and resolved:
            lines.append(f"- module constants at each evaluated shape: {' | '.join(resolved)}")
    except SyntaxError:
        pass
    if device == "interpret" and not shapes and spec.interpret_shapes and spec.shapes != spec.interpret_shapes:
        target = "; ".join(shape_text(s) for s in spec.shapes)
        lines.append(f"- production shapes on the GPU (tune for these): {target}")
    tolerances = ", ".join(
        f"{d} (atol {spec.tolerance(d).atol:g}, rtol {spec.tolerance(d).rtol:g})" for d in spec.dtypes
    )
    lines.append(f"- dtypes: {tolerances}")
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


def ancestry_line(view: ParentView) -> str:
    ev = view.evaluation
    if ev is None:
        outcome = "not evaluated"
    elif not ev.correct:
        outcome = f"FAILED {ev.failure}: {ev.message[:160]}"
    elif ev.fitness:
        outcome = f"correct, {ev.fitness:.3f}x"
    else:
        outcome = "correct (untimed)"
    note = f" ({view.note})" if view.note else ""
    return f"- #{view.node_id} {view.kind}{note}: {outcome}"


class PromptBuilder:
    def __init__(self, token_budget: int = 24000, knowledge=None):
        self.token_budget = token_budget
        self._knowledge = knowledge

    def _kb_sections(self, spec: Spec, draft: bool) -> list[Section]:
        kb = self._knowledge
        if kb is None:
            from kernelevolve.knowledge import KnowledgeBase, KnowledgeError

            try:
                kb = self._knowledge = KnowledgeBase.load()
            except KnowledgeError:
                return []  # prompts work without the knowledge base, only less well
        found = kb.for_spec(spec)
        out = []
        if found.hardware:
            out.append(Section("hardware", [found.hardware.text], PRIORITY["hardware"]))
        out.append(Section("constraints", [d.text for d in found.constraints], PRIORITY["constraints"], joiner="\n\n"))
        out.append(Section("guidance", [d.text for d in found.guidance], PRIORITY["guidance"], joiner="\n\n"))
        if found.kernel:
            texts = [d.text for d in [found.kernel, *found.other_kernels]]
            out.append(Section("kernel", texts, DRAFT_KERNEL_PRIORITY if draft else PRIORITY["kernel"], joiner="\n\n"))
        return out

    def _common(self, spec: Spec, context: OperatorContext, exclude: set[int], draft: bool) -> list[Section]:
        sections = [
            Section("spec", [spec_summary(spec, context.device, context.shapes)], 100, required=True),
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
        return sections + self._kb_sections(spec, draft)

    def _fit(self, template: str, sections: list[Section], spec: Spec, **values) -> Fitted:
        ctor = constructor_signature(spec.reference_source)
        return fit(
            sections, lambda s: render(template, s=s, spec_name=spec.name, ctor=ctor, **values), self.token_budget
        )

    # -- the four prompts -----------------------------------------------------------------
    def draft(self, spec: Spec, context: OperatorContext) -> Fitted:
        return self._fit("draft.j2", self._common(spec, context, set(), draft=True), spec)

    def debug(self, parent: ParentView, context: OperatorContext) -> Fitted:
        spec = context.spec
        sections = self._common(spec, context, {parent.node_id}, draft=False)
        sections.append(Section("parent", [fenced(parent.source or "# (the reply held no code)")], 100, required=True))
        sections.append(Section("evaluation", [evaluation_summary(parent)], 100, required=True))
        log = (parent.evaluation.log if parent.evaluation else "") or ""
        if log.strip():
            sections.append(Section("log", log.strip()[-LOG_CHARS:].splitlines(), PRIORITY["log"], keep="tail"))
        return self._fit("debug.j2", sections, spec, parent_id=parent.node_id)

    def optimise(self, parent: ParentView, context: OperatorContext) -> Fitted:
        spec = context.spec
        sections = self._common(spec, context, {parent.node_id}, draft=False)
        sections.append(Section("parent", [fenced(parent.source or "")], 100, required=True))
        sections.append(Section("evaluation", [evaluation_summary(parent)], 100, required=True))
        return self._fit("optimise.j2", sections, spec, parent_id=parent.node_id)

    def crossover(self, a: ParentView, b: ParentView, context: OperatorContext) -> Fitted:
        spec = context.spec
        sections = self._common(spec, context, {a.node_id, b.node_id}, draft=False)
        sections += [
            Section("parent", [fenced(a.source or "")], 100, required=True),
            Section("evaluation", [evaluation_summary(a)], 100, required=True),
            Section("other", [fenced(b.source or "")], 100, required=True),
            Section("other_evaluation", [evaluation_summary(b)], 100, required=True),
        ]
        return self._fit("crossover.j2", sections, spec, parent_id=a.node_id, other_id=b.node_id)
