"""Choosing a prompt's documents: the operator's family first, within a character budget.

`select(kb, spec, budget_chars=...)` reads what the reference computes (knowledge/traits.py),
scores every document against a query built from it (BM25, knowledge/bm25.py), and fills the
budget in this order, each step best-scored first, a document that does not fit skipped:

1. in a draft prompt, the spec's own reference kernel (its `kernel:` or name);
2. the best guidance document of the operator's family (of a kin family, RMSNorm for a
   LayerNorm, where the family has none), per kernel language;
3. constraints written for the family (tl.dot rules for a matmul);
4. the best general constraints document (family `any`), per kernel language;
5. in a draft prompt, the closest reference kernel of the family;
6. the target GPU's document;
7. a second guidance document of the family; more general constraints; one general guidance;
8. in an improve prompt the family's reference kernel, in a draft one a kin family's, if it fits;
9. a document of another family, only when its score beats every one of the family's own
   documents of its kind (so an unrelated family never fills a prompt by default).

Every pick says why it was taken (`Pick.why`); `Selection.carried()` is the one line a prompt
records, which `carried_documents` (operators/context_builder.py) reads back from a stored prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING, Protocol, Sequence

from kernelevolve.knowledge.bm25 import tokenize
from kernelevolve.knowledge.document import Document
from kernelevolve.knowledge.traits import OperatorTraits, of_spec

if TYPE_CHECKING:
    from kernelevolve.spec import Spec

OWN_GUIDANCE = 2  # guidance documents of the family, per kernel language
GENERAL_CONSTRAINTS = 3  # general constraints, per kernel language
GENERAL_GUIDANCE = 1
SEPARATOR = 2  # the blank line between two documents in a prompt


class Library(Protocol):
    """What selection reads of a knowledge base (knowledge/base.py's KnowledgeBase, which calls `select`)."""

    documents: list[Document]

    def hardware(self, name: str) -> Document | None: ...

    def scores(self, terms: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class Pick:
    doc: Document
    why: str  # "family layernorm", "kin family rmsnorm", "target GPU", "general", "the spec's kernel", ...
    score: float = 0.0

    def describe(self) -> str:
        score = f", score {self.score:.1f}" if self.score > 0 else ""
        return f"{self.doc.ref} ({self.why}{score})"


@dataclass
class Selection:
    traits: OperatorTraits
    picks: list[Pick] = field(default_factory=list)
    left_out: list[Pick] = field(default_factory=list)  # the family's own documents that did not fit
    budget_chars: int = 0

    @property
    def used_chars(self) -> int:
        return sum(len(p.doc.text) + SEPARATOR for p in self.picks)

    def of_kind(self, kind: str) -> list[Document]:
        return [p.doc for p in self.picks if p.doc.kind == kind]

    @property
    def documents(self) -> list[Document]:
        return [p.doc for p in self.picks]

    def carried(self) -> str:
        """`guidance/memory_bound_reductions (family layernorm, score 9.1); hardware/h200 (target GPU)`."""
        return "; ".join(p.describe() for p in self.picks)


def _generic_description(spec: Spec) -> bool:
    return (spec.description or "").startswith("KernelBench-style module ")


def query_of(spec: Spec, traits: OperatorTraits, device: str = "cuda") -> str:
    """The search words: the families (twice: they matter most), their usual vocabulary, the
    operator names the reference calls, the spec's tags, name and description."""
    families = " ".join(f.replace("_", " ") for f in traits.families)
    name = " ".join(w for w in spec.name.replace("_", " ").replace("-", " ").split() if not w.isdigit())
    words = [families, families, traits.query_words(), " ".join(traits.evidence), " ".join(spec.tags), name]
    if spec.description and not _generic_description(spec):
        words.append(spec.description)
    if device == "interpret":
        words.append("interpreter")
    return " ".join(words)


def select(
    kb: Library,
    spec: Spec,
    *,
    budget_chars: int,
    draft: bool = True,
    device: str = "cuda",
    traits: OperatorTraits | None = None,
) -> Selection:
    from kernelevolve.languages import LANGUAGES, of_document

    traits = traits if traits is not None else of_spec(spec)
    languages = list(getattr(spec, "languages", None) or ["triton"])
    families = list(traits.families)
    kin = [f for f in traits.own() if f not in families]
    query = query_of(spec, traits, device)
    score: dict[str, float] = {}
    for lang in languages:
        # Another language's documents are found by its name and what the prompt says about it as well.
        words = query if lang == "triton" else f"{query} {LANGUAGES[lang].title} {lang} {lang} {LANGUAGES[lang].prompt}"
        terms = tokenize(words)
        values = kb.scores(terms) if terms else [0.0] * len(kb.documents)
        score.update({d.ref: v for d, v in zip(kb.documents, values) if of_document(d) == lang})
    hardware = kb.hardware(spec.hardware)

    def usable(d: Document) -> bool:
        if device != "interpret" and "interpreter" in d.tags:  # how the CPU interpreter differs: not on a GPU
            return False
        return d.kind != "hardware" and d.applies_to_hardware(spec.hardware) and of_document(d) in languages

    docs = [d for d in kb.documents if usable(d)]

    def is_spec_kernel(d: Document) -> bool:
        return d.kind == "kernels" and (d.name == spec.kernel_name or d.spec == spec.kernel_name)

    def relation(d: Document) -> tuple[int, str] | None:
        """(tier, why) for a document of the operator's own family; None for general or other."""
        named = [f for f in d.family if f != "any"]
        for i, f in enumerate(families):
            if f in named:  # the document is mainly about it when it names it first
                return (0 if named[0] == f else 1) + 2 * i, f"family {f}"
        for f in kin:
            if f in named:
                return 2 * len(families) + (0 if named[0] == f else 1), f"kin family {f}"
        return None

    def general(d: Document) -> bool:
        return "any" in d.family

    def ranked(pool: list[Document], why) -> list[Pick]:
        picks = []
        for d in pool:
            tier_why = why(d)
            if tier_why is not None:
                picks.append((tier_why[0], -score[d.ref], d.ref, Pick(d, tier_why[1], score[d.ref])))
        return [p for *_, p in sorted(picks, key=lambda t: t[:3])]

    def per_language(picks: list[Pick], limit: int) -> list[Pick]:
        seen: dict[str, int] = {}
        out = []
        for p in picks:
            lang = of_document(p.doc)
            if seen.get(lang, 0) < limit:
                out.append(p)
                seen[lang] = seen.get(lang, 0) + 1
        return out

    own_kind = {kind: ranked([d for d in docs if d.kind == kind], relation) for kind in ("guidance", "constraints")}
    # The family's kernels, the spec's own one apart.
    own_kernels = ranked([d for d in docs if d.kind == "kernels" and not is_spec_kernel(d)], relation)
    spec_kernels = [Pick(d, "the spec's reference kernel", score[d.ref]) for d in docs if is_spec_kernel(d)]
    general_kind = {
        kind: ranked([d for d in docs if d.kind == kind and general(d)], lambda d: (0, "general"))
        for kind in ("constraints", "guidance")
    }
    for kind in general_kind:  # a general document the query does not touch teaches this operator nothing
        general_kind[kind] = [p for p in general_kind[kind] if p.score > 0]

    def direct_first(picks: list[Pick]) -> list[Pick]:
        """The operator's own families' documents; a kin family's only where those are none."""
        direct = [p for p in picks if not p.why.startswith("kin ")]
        return direct or picks

    steps: list[list[Pick]] = []
    guidance = direct_first(own_kind["guidance"])
    if draft:
        steps.append(spec_kernels)
    steps.append(per_language(guidance, 1))
    steps.append(own_kind["constraints"])
    steps.append(per_language(general_kind["constraints"], 1))
    direct_kernels = [p for p in own_kernels if not p.why.startswith("kin ")]
    family_kernel = per_language(direct_kernels or own_kernels, 1)
    if draft and direct_kernels:
        steps.append(family_kernel)
    if hardware is not None:
        steps.append([Pick(hardware, "target GPU")])
    steps.append(per_language(guidance, OWN_GUIDANCE))
    steps.append(per_language(general_kind["constraints"], GENERAL_CONSTRAINTS))
    steps.append(per_language(general_kind["guidance"], GENERAL_GUIDANCE))
    if not draft:
        steps.append(spec_kernels or family_kernel)
    elif not direct_kernels:
        steps.append(family_kernel)  # a kin family's kernel: after everything of the family and the GPU

    # Another family's document: only above the best score of the family's own documents of its kind.
    own_best: dict[tuple[str, str], float] = {}  # (kind, language) -> the best score of the family's own
    for p in own_kind["guidance"] + own_kind["constraints"] + own_kernels + spec_kernels:
        key = (p.doc.kind, of_document(p.doc))
        own_best[key] = max(own_best.get(key, 0.0), p.score)
    others = []
    for d in docs:
        if general(d) or relation(d) is not None or is_spec_kernel(d):
            continue
        best = own_best.get((d.kind, of_document(d)), 0.0)
        if score[d.ref] > best > 0:
            why = f"family {'/'.join(d.family)}, above the best of the family's own {d.kind} ({best:.1f})"
            others.append(Pick(d, why, score[d.ref]))
    steps.append(sorted(others, key=lambda p: (-p.score, p.doc.ref)))

    def interleaved(step: list[Pick]) -> list[Pick]:
        """Best of each language, then the second best of each...: scores of two languages' queries
        are not comparable, and each language needs its own documents."""
        by_lang = [[p for p in step if of_document(p.doc) == lang] for lang in languages]
        return [p for rank in zip_longest(*by_lang) for p in rank if p is not None]

    selection = Selection(traits=traits, budget_chars=budget_chars)
    taken: set[str] = set()
    for step in steps:
        for pick in interleaved(step):
            if pick.doc.ref in taken:
                continue
            size = len(pick.doc.text) + SEPARATOR
            if selection.used_chars + size <= budget_chars:
                selection.picks.append(pick)
                taken.add(pick.doc.ref)
            elif pick.why != "general":
                selection.left_out.append(pick)
    left = {p.doc.ref: p for p in selection.left_out if p.doc.ref not in taken}
    selection.left_out = list(left.values())
    return selection
