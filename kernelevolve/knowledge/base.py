"""Loading the knowledge base from disk and retrieving documents for prompts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from kernelevolve.knowledge.bm25 import BM25, tokenize
from kernelevolve.knowledge.document import Document
from kernelevolve.knowledge.frontmatter import KINDS, KnowledgeError, kernel_docstring, split_front_matter
from kernelevolve.knowledge.select import select as select_documents

if TYPE_CHECKING:
    from kernelevolve.spec import Spec

# Title and tags say what a document is about, so they count more than a passing mention.
TITLE_WEIGHT, TAG_WEIGHT = 3, 2

_cache: dict[Path, "KnowledgeBase"] = {}
_cache_lock = threading.Lock()


@dataclass
class SpecKnowledge:
    """What `KnowledgeBase.for_spec` found for one spec, in prompt order."""

    hardware: Document | None
    constraints: list[Document] = field(default_factory=list)
    guidance: list[Document] = field(default_factory=list)
    kernel: Document | None = None
    # Reference kernels in the spec's other allowed languages (a CuTe DSL one beside the Triton one).
    other_kernels: list[Document] = field(default_factory=list)

    @property
    def documents(self) -> list[Document]:
        head = [self.hardware] if self.hardware else []
        tail = ([self.kernel] if self.kernel else []) + self.other_kernels
        return head + self.constraints + self.guidance + tail

    @property
    def text(self) -> str:
        return "\n\n".join(d.text for d in self.documents)


class KnowledgeBase:
    """All documents under one root: hardware/, constraints/, guidance/ (markdown), kernels/ (Python)."""

    def __init__(self, documents: Iterable[Document], root: Path | None = None):
        self.root = root
        self.documents = sorted(documents, key=lambda d: (KINDS.index(d.kind), d.name))
        self._index = BM25([_index_tokens(d) for d in self.documents])

    # -- loading --------------------------------------------------------------------------
    @classmethod
    def load(cls, root: str | Path | None = None, *, fresh: bool = False) -> "KnowledgeBase":
        """Read every document under `root` (default: paths.KNOWLEDGE_BASE), once per process."""
        if root is None:
            from kernelevolve import paths

            root = paths.knowledge_base()
        root = Path(root).resolve()
        with _cache_lock:
            if fresh or root not in _cache:
                _cache[root] = cls(_read_all(root), root)
            return _cache[root]

    # -- lookup ---------------------------------------------------------------------------
    def get(self, name: str) -> Document | None:
        """By `kind/name`, or by bare name when only one document has it (else KnowledgeError)."""
        name = name.strip().lower().removesuffix(".md").removesuffix(".py")
        if "/" in name:
            return next((d for d in self.documents if d.ref == name), None)
        found = [d for d in self.documents if d.name.lower() == name]
        if len(found) > 1:
            raise KnowledgeError(f"{name!r} is ambiguous: use one of {', '.join(d.ref for d in found)}")
        return found[0] if found else None

    def hardware(self, name: str) -> Document | None:
        """The hardware document for a GPU id such as `h200`."""
        gpu = name.strip().lower()
        docs = [d for d in self.documents if d.kind == "hardware"]
        return next((d for d in docs if d.name.lower() == gpu), None) or next(
            (d for d in docs if gpu in d.hardware), None
        )

    def reference_kernel(self, name: str) -> Document | None:
        """The reference kernel named `name` (file stem), or the one whose `spec` is `name`."""
        kernels = [d for d in self.documents if d.kind == "kernels"]
        return next((d for d in kernels if d.name == name), None) or next((d for d in kernels if d.spec == name), None)

    # -- retrieval ------------------------------------------------------------------------
    def rank(
        self,
        query: str,
        *,
        kind: str | None = None,
        hardware: str | None = None,
        family: str | None = None,
        tags: Iterable[str] | None = None,
        limit: int | None = 5,
    ) -> list[tuple[Document, float]]:
        """(document, BM25 score) best first, among documents passing every filter.

        A document marked [any] passes the hardware or family filter for every value; `tags`
        keeps documents carrying all of them. An empty query keeps the filtered documents in
        their stored order (score 0).
        """
        if kind is not None and kind not in KINDS:
            raise KnowledgeError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
        wanted_tags = {t.strip().lower() for t in tags or ()}
        keep = [
            i
            for i, d in enumerate(self.documents)
            if (kind is None or d.kind == kind)
            and (hardware is None or d.applies_to_hardware(hardware))
            and (family is None or d.applies_to_family(family))
            and wanted_tags <= set(d.tags)
        ]
        terms = tokenize(query)
        if terms:
            scores = self._index.scores(terms)
            keep = [i for i in keep if scores[i] > 0]
            keep.sort(key=lambda i: -scores[i])  # stable: ties keep stored order
        else:
            scores = [0.0] * len(self.documents)
        hits = [(self.documents[i], scores[i]) for i in keep]
        return hits if limit is None else hits[:limit]

    def scores(self, terms) -> list[float]:
        """Each document's BM25 score for these (tokenized) terms, in `documents` order."""
        return self._index.scores(terms)

    def search(self, query: str, **filters) -> list[Document]:
        """Documents best first; the same filters as `rank`."""
        return [d for d, _ in self.rank(query, **filters)]

    def for_spec(self, spec: "Spec", limit: int = 3, *, include_kernel: bool = True) -> SpecKnowledge:
        """The target GPU's document, the `limit` most relevant constraints and guidance
        documents, and the closest reference kernel (by the spec's kernel name, else family), per
        kernel language the spec allows (a document's `language:`, Triton by default)."""
        from kernelevolve.languages import LANGUAGES, of_document

        family = (spec.family or "").lower()
        query = " ".join([spec.name.replace("_", " "), family, family, *spec.tags, spec.description])
        allowed = list(getattr(spec, "languages", None) or ["triton"])

        def relevant(kind: str) -> list[Document]:
            out = []
            for lang in allowed:
                # A language's own name in the query: its general documents (JIT, errors) rank too.
                words = query if lang == "triton" else f"{query} {LANGUAGES[lang].title} {lang} {lang}"
                hits = [
                    h
                    for h in self.rank(words, kind=kind, hardware=spec.hardware, limit=None)
                    if of_document(h[0]) == lang
                ]
                # A document written for this family outranks a general one that merely matches words.
                hits.sort(key=lambda h: (not (family and family in h[0].family), -h[1]))
                out += [d for d, _ in hits[:limit]]
            return out

        kernels: list[Document] = []
        if include_kernel:
            for lang in allowed:
                mine = [d for d in self.documents if d.kind == "kernels" and of_document(d) == lang]
                kernel = next((d for d in mine if d.name == spec.kernel_name), None) or next(
                    (d for d in mine if d.spec == spec.kernel_name), None
                )
                if kernel is None and family:
                    same = [d for d in mine if family in d.family]
                    ranked = [d for d in self.search(query, kind="kernels", family=family, limit=None) if d in mine]
                    kernel = (ranked or same or [None])[0]
                if kernel is not None:
                    kernels.append(kernel)
        return SpecKnowledge(
            hardware=self.hardware(spec.hardware),
            constraints=relevant("constraints"),
            guidance=relevant("guidance"),
            kernel=kernels[0] if kernels else None,
            other_kernels=kernels[1:],
        )

    def select(self, spec: "Spec", *, budget_chars: int, draft: bool = True, device: str = "cuda", traits=None):
        """The documents a prompt carries for `spec` within `budget_chars`, the operator's family
        first, each with why it was taken (knowledge/select.py)."""
        return select_documents(self, spec, budget_chars=budget_chars, draft=draft, device=device, traits=traits)

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self):
        return iter(self.documents)


def _index_tokens(doc: Document) -> list[str]:
    return (
        tokenize(doc.title) * TITLE_WEIGHT
        + tokenize(" ".join(doc.tags)) * TAG_WEIGHT
        + tokenize(" ".join(f for f in doc.family if f != "any"))
        + tokenize(doc.body)
    )


def _read_all(root: Path) -> list[Document]:
    if not root.is_dir():
        raise KnowledgeError(f"{root}: knowledge base folder does not exist")
    docs = []
    for kind in KINDS:
        folder = root / kind
        if not folder.is_dir():
            continue
        pattern = "*.py" if kind == "kernels" else "*.md"
        for path in sorted(folder.glob(pattern)):
            if path.name.startswith(("_", ".", "test_")):
                continue
            docs.append(read_document(path, kind))
    return docs


def read_document(path: Path, kind: str) -> Document:
    """Parse one file; `kind` is the folder it sits in and must match its front matter."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise KnowledgeError(f"{path}: cannot be read: {e}") from None
    source = None
    if kind == "kernels":
        source, text = text, kernel_docstring(text, path)
    header, body = split_front_matter(text, path)
    if header["kind"] != kind:
        raise KnowledgeError(f"{path}: front matter says kind {header['kind']!r} but the file is in {kind}/")
    known = {"title", "kind", "tags", "hardware", "family", "spec"}
    return Document(
        path=path,
        kind=kind,
        title=header["title"].strip(),
        tags=tuple(header["tags"]),
        hardware=tuple(header["hardware"]),
        family=tuple(header["family"]),
        body=body,
        source=source,
        spec=header.get("spec"),
        extra={k: v for k, v in header.items() if k not in known},
    )
