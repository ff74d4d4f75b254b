"""One knowledge-base document: a markdown note or a reference kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Document:
    path: Path
    kind: str  # hardware | constraints | guidance | kernels
    title: str
    tags: tuple[str, ...]
    hardware: tuple[str, ...]  # GPU ids, or ("any",)
    family: tuple[str, ...]  # operator families, or ("any",)
    body: str  # markdown body; for a kernel, its docstring after the front matter
    source: str | None = None  # whole Python source of a reference kernel
    spec: str | None = None  # the spec a reference kernel solves
    extra: dict = field(default_factory=dict, compare=False, repr=False)  # other front-matter keys

    @property
    def name(self) -> str:
        """File stem: `h200`, `masking`, `rmsnorm`."""
        return self.path.stem

    @property
    def ref(self) -> str:
        """`kind/name`, unique within a knowledge base."""
        return f"{self.kind}/{self.name}"

    def applies_to_hardware(self, gpu: str) -> bool:
        return "any" in self.hardware or gpu.lower() in self.hardware

    def applies_to_family(self, family: str) -> bool:
        return "any" in self.family or family.lower() in self.family

    @property
    def text(self) -> str:
        """What goes into a prompt: a heading naming the document, then its content."""
        head = f"## {self.title} ({self.ref})"
        if self.source is not None:
            return f"{head}\n\n```python\n{self.source.rstrip()}\n```"
        return f"{head}\n\n{self.body.strip()}"

    def summary(self) -> dict:
        """JSON-friendly header fields (no body)."""
        out = {
            "ref": self.ref,
            "name": self.name,
            "kind": self.kind,
            "title": self.title,
            "path": str(self.path),
            "tags": list(self.tags),
            "hardware": list(self.hardware),
            "family": list(self.family),
        }
        if self.spec:
            out["spec"] = self.spec
        return out
