"""The search graph: its home is kernelevolve.records.graph (records every part of the package shares:
the database loads it, the views and review pages show it, the policies select from it); this path stays
for code written against it."""

from kernelevolve.records.graph import EVALUATED, PENDING, Node, SearchGraph, best_nodes

__all__ = ["EVALUATED", "PENDING", "Node", "SearchGraph", "best_nodes"]
