"""Every repository path the documentation and the code cite exists: the README, docs/, the knowledge base's
documents and kernel files, the package, the benchmark scripts and their results' notes name files such as
`bench/results/int8_mqa_decode/h200/.../README.md` or `knowledge_base/guidance/attention.md`, and a reader who
follows one must find it. A glob (`bench/results/*/h200/`) must match something; `{a,b}` stands for both."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SOURCES = [
    "README.md",
    "docs/**/*.md",
    "docs/**/*.py",
    "knowledge_base/**/*.md",
    "knowledge_base/kernels/*.py",
    "kernelevolve/**/*.py",
    "bench/**/*.py",
    "bench/**/*.sh",
    "bench/README.md",
    "bench/results/**/*.md",
]
TOP = ("bench", "knowledge_base", "specs", "tests", "docs", "kernelevolve", "harness_templates")
# A path starts a token (not inside ~/.cache/kernelevolve/... or a URL) and runs over path characters.
PATH = re.compile(r"(?<![\w./~:$-])(?:" + "|".join(TOP) + r")/[\w./*{},<>$-]*")
# A citation broken over two lines: "... (bench/results/\n    # attention/h200/...)" reads as one path.
LINE_BREAK = re.compile(r"/\n[ \t]*(?:#[ \t]*)?(?=[\w.-]+[/.])")
# Written by the build, not kept in the repository (setup.py copies the data folders into the wheel).
BUILT = {"kernelevolve/bundled"}
# A segment that stands for a name: NAME.py, RUN_ID, <kernel>.py.j2, {name}.yaml (an f-string), $OUT.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:\.\w+)?$|<[^>]*>|\{\w*\}|\$")
# Cited in package code that this change does not own; each must fail here until it is fixed (strict xfail).
KNOWN_DANGLING: dict[str, set[str]] = {}


def _sources() -> list[Path]:
    found = set()
    for pattern in SOURCES:
        found.update(p for p in ROOT.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return sorted(found)


def _expand(path: str) -> list[str]:
    """`specs/{softmax,rmsnorm}.yaml` -> both paths."""
    parts = re.split(r"(\{[^{}]*\})", path)
    options = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(choice) for choice in itertools.product(*options)]


def _is_placeholder(path: str) -> bool:
    """knowledge_base/kernels/NAME.py, bench/results/<operator>/, $OUT/...: a pattern for the reader, not a file."""
    return any(PLACEHOLDER.match(seg) and not seg.startswith("README") for seg in path.split("/"))


def citations(text: str) -> list[str]:
    """The repository paths cited in a text, trailing punctuation and ellipses removed."""
    out = []
    for match in PATH.finditer(LINE_BREAK.sub("/", text)):
        path = match.group(0).rstrip(".,;:")
        if path.count("{") != path.count("}"):  # a dict or f-string in code, not a path
            continue
        out.append(path)
    return out


def _one(path: str) -> bool:
    path = path.rstrip("/").replace("NAME", "*")  # kernelevolve/harness/runtime/profile_NAME.py: one per name
    if "*" in path:
        return any(ROOT.glob(path))
    if (ROOT / path).exists():
        return True
    # a module's attribute: kernelevolve/profiling/runner.run_tool
    head, _, name = path.rpartition("/")
    return "." in name and (ROOT / head / (name.split(".")[0] + ".py")).is_file()


def exists(path: str) -> bool:
    if path.rstrip("/") in BUILT or _is_placeholder(path):
        return True
    return all(_one(p) for p in _expand(path) if p.rstrip("/"))


def test_the_scan_finds_citations_and_judges_them():
    """The checker itself: a citation is found in prose and code, broken lines are joined, and a wrong one fails."""
    text = 'See bench/results/\n    # x/y.md, `knowledge_base/guidance/attention.md`; ~/.cache/kernelevolve/logs/a.log\nP = "specs/{softmax,rmsnorm}.yaml"'
    assert citations(text) == [
        "bench/results/x/y.md",
        "knowledge_base/guidance/attention.md",
        "specs/{softmax,rmsnorm}.yaml",
    ]
    assert exists("knowledge_base/guidance/attention.md") and exists("specs/{softmax,rmsnorm}.yaml")
    assert exists("bench/results/*/h200/") and exists("knowledge_base/kernels/NAME.py")
    assert exists("kernelevolve/profiling/runner.run_tool") and not exists("kernelevolve/profiling/no_such.run_tool")
    assert exists("kernelevolve/harness/runtime/profile_NAME.py") and not exists("kernelevolve/harness/no_such_NAME.py")
    assert not exists("bench/results/reference_kernels_final.md")
    assert not exists("specs/{softmax,no_such_spec}.yaml")
    assert not exists("bench/results/*/no_such_gpu/")


def _cases():
    for source in _sources():
        name = str(source.relative_to(ROOT))
        marks = [pytest.mark.xfail(strict=True, reason="known dangling")] if name in KNOWN_DANGLING else []
        yield pytest.param(source, id=name, marks=marks)


@pytest.mark.parametrize("source", _cases())
def test_every_cited_path_exists(source: Path):
    missing = sorted({path for path in citations(source.read_text(errors="replace")) if not exists(path)})
    known = KNOWN_DANGLING.get(str(source.relative_to(ROOT)), set())
    assert not missing, f"{source.relative_to(ROOT)} cites paths that do not exist: {', '.join(missing)}"
    assert not known, f"{source.relative_to(ROOT)}: listed in KNOWN_DANGLING but every citation resolves"


# -- the benchmarks' index: bench/README.md ---------------------------------------------------------------------
INDEX = ROOT / "bench" / "README.md"


def _operator_rows() -> dict[str, list[str]]:
    """spec name -> the cells of its row in the index's operators table."""
    rows = {}
    for line in INDEX.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and (m := re.fullmatch(r"`specs/(\w+)\.yaml`", cells[1])):
            rows[m.group(1)] = cells
    return rows


def test_the_index_has_a_row_for_every_spec_naming_where_everything_is():
    rows = _operator_rows()
    specs = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))
    assert sorted(rows) == specs, f"bench/README.md: rows for {sorted(rows)}, specs {specs}"
    for name, (_, _, kernels, guidance, tests, benchmarks, numbers) in rows.items():
        assert re.search(r"`\w+\.py`", kernels), f"{name}: no kernel file"
        assert "knowledge_base/guidance/" in guidance or guidance.startswith("as "), f"{name}: no guidance"
        assert "tests/kernels/" in tests or tests.startswith("as "), f"{name}: no test"
        assert re.search(r"bench/(kernels|investigations)/\S+\.(py|sh)", benchmarks), f"{name}: no benchmark script"
        assert re.search(r"bench/results/\S+/README\.md`[^|]*\d", numbers), f"{name}: no results README with a figure"
        kernel_files = re.findall(r"`(\w+\.py)`", kernels)
        assert all((ROOT / "knowledge_base" / "kernels" / f).is_file() for f in kernel_files), (name, kernel_files)


def test_the_index_names_every_script_and_every_result_folder():
    text = INDEX.read_text()
    scripts = [p for p in (ROOT / "bench").rglob("*") if p.suffix in (".py", ".sh") and "results" not in p.parts]
    folders = [p for p in (ROOT / "bench" / "results").glob("*/*/*") if p.is_dir()]
    assert scripts and folders
    unnamed = [str(p.relative_to(ROOT)) for p in scripts if f"`{p.relative_to(ROOT)}`" not in text]
    unnamed += [str(p.relative_to(ROOT)) + "/" for p in folders if f"`{p.relative_to(ROOT)}/`" not in text]
    assert not unnamed, f"bench/README.md does not name: {', '.join(sorted(unnamed))}"
