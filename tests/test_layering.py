"""The package imports one way: no cycle among its rooms (top-level modules and subpackages of
kernelevolve) nor among its modules, and no room reaches into another's private names.

Every import counts, wherever it is written: at the top of a module, inside a function, under
`if TYPE_CHECKING:`, or as `importlib.import_module("kernelevolve...")`. The source is read with `ast`;
nothing of the package is imported, so this takes a second or two. The README's layout section lists the
rooms bottom to top, and imports go down that list.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Site:
    """One import: who imports what, and where it is written."""

    importer: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.importer} -> {self.target})"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def room(module: str) -> str:
    """kernelevolve.evaluation.result -> evaluation; kernelevolve.spec -> spec; kernelevolve -> kernelevolve."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owner(name: str, modules: set[str]) -> str | None:
    """The module a dotted name lives in: itself if it is a module, else its longest module prefix."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


@functools.lru_cache(maxsize=None)
def scan(root: Path = ROOT) -> tuple[dict[str, Path], tuple[Site, ...], tuple[Site, ...]]:
    """The package's modules, every import between them, and every private name used across rooms."""
    files = {module_name(p, root): p for p in sorted((root / "kernelevolve").rglob("*.py"))}
    modules = set(files)
    sites: list[Site] = []
    private: list[Site] = []
    for name, path in files.items():
        rel = str(path.relative_to(root))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=rel)
        aliases: dict[str, str] = {}  # local name -> the module an import bound it to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _owner(alias.name, modules)
                    if target is None:
                        continue
                    sites.append(Site(name, target, rel, node.lineno))
                    if alias.asname:
                        aliases[alias.asname] = target
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                if _owner(base, modules) is None:
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    target = full if full in modules else _owner(base, modules)
                    sites.append(Site(name, target, rel, node.lineno))
                    if target == full:
                        aliases[alias.asname or alias.name] = target
                    elif _is_private(alias.name) and room(target) != room(name):
                        private.append(Site(name, full, rel, node.lineno))
            elif (  # importlib.import_module("kernelevolve.x") / __import__("kernelevolve.x"): an import too
                isinstance(node, ast.Call)
                and _dotted(node.func) in ("importlib.import_module", "import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                target = _owner(node.args[0].value, modules)
                if target is not None:
                    sites.append(Site(name, target, rel, node.lineno))
        for node in ast.walk(tree):
            # module._name, where module is another room's module: bound by an import (`as`, `from ... import
            # module`) or written out (`kernelevolve.x.y._name` after `import kernelevolve.x.y`)
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            head, _, rest = (_dotted(node.value) or "").partition(".")
            owner = _owner(".".join(filter(None, [aliases.get(head, head), rest])), modules)
            if owner is not None and room(owner) != room(name) and owner != "kernelevolve":
                private.append(Site(name, f"{owner}.{node.attr}", rel, node.lineno))
    sites = list(dict.fromkeys(s for s in sites if s.target != s.importer))
    return files, tuple(sites), tuple(private)


def _edges(sites: tuple[Site, ...], key) -> dict[tuple[str, str], list[Site]]:
    edges: dict[tuple[str, str], list[Site]] = defaultdict(list)
    for site in sites:
        a, b = key(site.importer), key(site.target)
        if a != b:
            edges[(a, b)].append(site)
    return edges


def _cycles_report(edges: dict[tuple[str, str], list[Site]], limit: int = 12) -> str:
    """Each strongly connected group, its shortest cycles and the import lines that make them."""
    graph = nx.DiGraph(list(edges))
    lines = []
    for group in sorted(nx.strongly_connected_components(graph), key=lambda g: sorted(g)):
        if len(group) < 2:
            continue
        lines.append(f"cycle among {sorted(group)}:")
        cycles = sorted(nx.simple_cycles(graph.subgraph(group)), key=lambda c: (len(c), c))
        shown: set[tuple[str, str]] = set()
        for cycle in cycles[:limit]:
            lines.append("  " + " -> ".join([*cycle, cycle[0]]))
            for a, b in zip(cycle, [*cycle[1:], cycle[0]]):
                if (a, b) in shown:
                    continue
                shown.add((a, b))
                for site in edges[(a, b)][:4]:
                    lines.append(f"    {site}")
        if len(cycles) > limit:
            lines.append(f"  ... and {len(cycles) - limit} more cycles")
    return "\n".join(lines)


def test_no_cycle_among_rooms():
    _, sites, _ = scan()
    report = _cycles_report(_edges(sites, room))
    assert not report, "imports run back up between rooms of kernelevolve:\n" + report


def test_no_cycle_among_modules():
    _, sites, _ = scan()
    report = _cycles_report(_edges(sites, lambda m: m))
    assert not report, "modules of kernelevolve import each other in a cycle:\n" + report


def test_no_private_name_across_rooms():
    _, _, private = scan()
    assert not private, "a room reaches into another room's private names:\n" + "\n".join(
        f"  {s.path}:{s.line} {s.importer} uses {s.target}" for s in private
    )


def readme_layers() -> list[list[str]]:
    """The README's layer list, bottom first: the numbered lines after 'Layers, bottom to top', each
    naming its rooms as `kernelevolve/<room>/` or `kernelevolve/<room>.py`."""
    text = (ROOT / "README.md").read_text()
    start = text.index("Layers, bottom to top")
    layers = []
    for line in text[start:].splitlines()[1:]:
        match = re.match(r"\d+\.\s+(.*)", line)
        if match:
            layers.append(re.findall(r"`kernelevolve/(\w+)(?:/|\.py)`", match.group(1)))
        elif layers:
            break
    return layers


def test_imports_go_down_the_readmes_layers():
    files, sites, _ = scan()
    layers = readme_layers()
    level = {r: i for i, names in enumerate(layers) for r in names}
    rooms = {room(m) for m in files} - {"kernelevolve"}
    assert rooms == set(level), (
        f"the README's layer list and the package differ: missing {sorted(rooms - set(level))}, "
        f"no such part {sorted(set(level) - rooms)}"
    )
    wrong = [
        f"  {s}: line {level[room(s.importer)] + 1} imports line {level[room(s.target)] + 1}"
        for s in sites
        if room(s.importer) != room(s.target)
        and room(s.target) in level
        and level[room(s.target)] >= level[room(s.importer)]
    ]
    assert not wrong, (
        "imports that do not go down the README's layers (README.md, 'Layers, bottom to top'):\n" + "\n".join(wrong)
    )


def test_the_scan_sees_imports_in_functions_and_type_checking_blocks(tmp_path):
    """The scan is what the tests above trust: it finds a lazy import and a TYPE_CHECKING one, resolves
    relative imports, and names the file and line of each."""
    pkg = tmp_path / "kernelevolve"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kernelevolve.high import Thing\n"
    )
    (pkg / "a" / "mid.py").write_text("from . import low\nfrom .low import x\n")
    (pkg / "high.py").write_text(
        "import kernelevolve.a.mid as m\ndef f():\n    from kernelevolve.a.low import _secret\n    return m._hidden\n"
    )
    (pkg / "top.py").write_text(
        "import importlib\nimport kernelevolve.a.low\n"
        "x = kernelevolve.a.low._inner\nm = importlib.import_module('kernelevolve.high')\n"
    )
    _, sites, private = scan(tmp_path)
    found = {(s.importer, s.target, s.path, s.line) for s in sites}
    assert ("kernelevolve.a.low", "kernelevolve.high", "kernelevolve/a/low.py", 3) in found
    assert ("kernelevolve.high", "kernelevolve.a.low", "kernelevolve/high.py", 3) in found
    assert ("kernelevolve.a.mid", "kernelevolve.a.low", "kernelevolve/a/mid.py", 1) in found
    assert ("kernelevolve.a.mid", "kernelevolve.a.low", "kernelevolve/a/mid.py", 2) in found
    assert ("kernelevolve.top", "kernelevolve.high", "kernelevolve/top.py", 4) in found
    assert {(s.target, s.path, s.line) for s in private} == {
        ("kernelevolve.a.low._secret", "kernelevolve/high.py", 3),
        ("kernelevolve.a.mid._hidden", "kernelevolve/high.py", 4),
        ("kernelevolve.a.low._inner", "kernelevolve/top.py", 3),
    }
    report = _cycles_report(_edges(sites, room))
    assert "cycle among ['a', 'high']" in report
    assert "kernelevolve/a/low.py:3" in report and "kernelevolve/high.py:" in report
