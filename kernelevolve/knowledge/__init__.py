"""Knowledge base: hardware notes, Triton constraints, optimisation guidance and reference
kernels, loaded from `knowledge_base/` and retrieved by filters and BM25 ranking."""

from kernelevolve.knowledge.base import KnowledgeBase, SpecKnowledge, read_document
from kernelevolve.knowledge.document import Document
from kernelevolve.knowledge.frontmatter import KINDS, KnowledgeError

__all__ = ["KINDS", "Document", "KnowledgeBase", "KnowledgeError", "SpecKnowledge", "read_document"]
