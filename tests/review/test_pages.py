"""The pages' own computations: diffs that apply, a tree layout that keeps parents over children."""

import random
import re
import time

from kernelevolve.review.layout import tree_layout
from kernelevolve.review.pages import source_diff
from kernelevolve.search.graph import Node, SearchGraph
from tests.review.conftest import SOFTMAX_KERNEL


def _apply(old: list[str], diff: str) -> list[str]:
    """Apply a unified diff to `old`, checking every context and removed line against it."""
    lines = diff.splitlines(keepends=True)[2:]
    out, pos, i = [], 0, 0
    while i < len(lines):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", lines[i])
        assert m, lines[i]
        count = int(m[2]) if m[2] is not None else 1
        begin = int(m[1]) - 1 if count else int(m[1])
        out += old[pos:begin]
        pos, i = begin, i + 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, text = lines[i][0], lines[i][1:]
            if tag in " -":
                assert old[pos] == text, (pos, old[pos], text)
                pos += 1
            if tag in " +":
                out.append(text)
            i += 1
    return out + old[pos:]


def test_every_diff_applies_to_the_parent_and_gives_the_child():
    rng = random.Random(5)
    base = SOFTMAX_KERNEL.splitlines(keepends=True)
    for trial in range(300):
        old = base[: rng.randint(0, 40)] if trial % 5 == 0 else list(base)
        new = list(old)
        for _ in range(rng.randint(0, 4)):
            k = rng.randint(0, max(0, len(new) - 1))
            op = rng.choice("idr")
            if op == "i" or not new:
                new.insert(k, f"inserted {trial}\n")
            elif op == "d":
                new.pop(k)
            else:
                new[k] = f"replaced {trial}\n"
        diff = source_diff("".join(old), "".join(new), 1, 2)
        assert _apply(old, diff) == new
        assert (diff == "") == (old == new)


def test_layout_puts_parents_over_their_children_and_leaves_in_columns():
    rng = random.Random(3)
    graph = SearchGraph()
    for i in range(2000):
        graph.add(Node(id=i, parents=() if i < 3 else (rng.randrange(max(0, i - 30), i),)))
    start = time.perf_counter()
    where = tree_layout(graph)
    assert time.perf_counter() - start < 1.0
    leaves = sorted(x for n, (x, _) in where.items() if not graph.children(n))
    assert leaves == list(range(len(leaves)))  # one column per leaf, none shared
    for n in graph.nodes():
        kids = [k for k in graph.children(n.id) if graph[k].parents[0] == n.id]
        x, depth = where[n.id]
        if n.parents:
            assert depth == where[n.parents[0]][1] + 1
        if kids:
            xs = [where[k][0] for k in kids]
            assert min(xs) <= x <= max(xs)
