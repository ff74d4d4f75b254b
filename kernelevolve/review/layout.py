"""Where each node of a search tree is drawn: a tidy tree under each node's first parent.

Leaves take consecutive columns in depth-first order; a parent sits midway over its first and
last child; the row is the depth. Crossover edges to second parents are drawn, not laid out.
Linear in the number of nodes, so a 2,000-node run lays out in milliseconds.
"""

from __future__ import annotations

from kernelevolve.records.graph import SearchGraph


def tree_layout(graph: SearchGraph) -> dict[int, tuple[float, int]]:
    """node id -> (column, depth); columns run from 0 to the number of leaves - 1."""
    kids: dict[int, list[int]] = {}
    roots = []
    for n in graph.nodes():
        if n.parents:
            kids.setdefault(n.parents[0], []).append(n.id)
        else:
            roots.append(n.id)
    out: dict[int, tuple[float, int]] = {}
    next_leaf = 0
    # Iterative post-order: a deep debug chain must not hit the recursion limit.
    for root in roots:
        stack = [(root, 0, False)]
        while stack:
            node_id, depth, children_done = stack.pop()
            children = kids.get(node_id, [])
            if not children:
                out[node_id] = (float(next_leaf), depth)
                next_leaf += 1
            elif children_done:
                out[node_id] = ((out[children[0]][0] + out[children[-1]][0]) / 2, depth)
            else:
                stack.append((node_id, depth, True))
                stack.extend((c, depth + 1, False) for c in reversed(children))
    return out
