"""Graph search over kernel candidates: the graph, selection policies, termination, the engine."""
