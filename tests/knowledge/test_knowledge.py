"""Knowledge base: shipped documents, the loader, BM25 retrieval, for_spec and the `kb` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelevolve import paths
from kernelevolve.cli.app import app
from kernelevolve.cli import knowledge_cmd  # noqa: F401  registers `kb` on the app
from kernelevolve.knowledge import KINDS, KnowledgeBase, KnowledgeError
from kernelevolve.spec import Spec
from kernelevolve.languages import detect, of_document

SHIPPED = paths.REPO_ROOT / "knowledge_base"
GPUS = ("h100", "h200", "a100", "b200", "mi300x", "mi350")


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase.load(SHIPPED, fresh=True)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def md(title: str, kind: str, body: str, tags="[]", hardware="[any]", family="[any]") -> str:
    return f"---\ntitle: {title}\nkind: {kind}\ntags: {tags}\nhardware: {hardware}\nfamily: {family}\n---\n{body}\n"


# -- shipped documents ----------------------------------------------------------------------


def test_every_shipped_document_parses_with_its_header(kb):
    files = [
        p
        for k in KINDS
        for p in (SHIPPED / k).glob("*.py" if k == "kernels" else "*.md")
        if not p.name.startswith(("_", ".", "test_"))
    ]
    assert len(kb) == len(files) >= 20
    for doc in kb:
        assert doc.path.parent.name == doc.kind
        assert doc.title.strip() and doc.tags and doc.hardware and doc.family, doc.path
        assert len(doc.body.split()) >= 40, f"{doc.path}: body too short to help a prompt"
        assert doc.text.startswith(f"## {doc.title}")
    assert {d.kind for d in kb} >= {"hardware", "constraints", "guidance"}


def test_every_gpu_has_a_hardware_document_with_its_key_figures(kb):
    for gpu in GPUS:
        doc = kb.hardware(gpu)
        assert doc is not None and doc.kind == "hardware" and gpu in doc.hardware, gpu
        for word in ("bandwidth" if "bandwidth" in doc.body.lower() else "TB/s", "datasheet"):
            assert word in doc.body, (gpu, word)
    h200 = kb.hardware("h200").body
    # The figures measured on our H200 travel with their provenance.
    assert "measured" in h200.lower() and "2026-11-21" in h200 and "4249" in h200 and "695" in h200
    assert kb.hardware("mi355x").name == "mi350"  # aliases listed in `hardware:` resolve
    assert kb.hardware("rtx9090") is None


def test_reference_kernels_carry_their_source_and_spec(kb):
    kernels = [d for d in kb if d.kind == "kernels"]
    if not kernels:
        pytest.skip("no reference kernels shipped yet")
    for doc in kernels:
        assert doc.spec, f"{doc.path}: front matter lacks `spec`"
        # Each imports its kernel language (front matter `language:`, Triton by default).
        assert doc.source and detect(doc.source).language == of_document(doc), doc.path
        assert doc.source in doc.text  # the prompt gets the whole file
        assert kb.reference_kernel(doc.name) is doc
        assert kb.reference_kernel(doc.spec) is not None


# -- retrieval ------------------------------------------------------------------------------


def test_online_softmax_query_ranks_the_reductions_guidance_first(kb):
    ranked = kb.search("online softmax split row", kind="guidance")
    assert ranked[0].name == "memory_bound_reductions"
    overall = [d.ref for d in kb.search("online softmax split row", limit=3)]
    assert "guidance/memory_bound_reductions" in overall


@pytest.mark.parametrize(
    "query, expected",
    [
        ("int32 overflow program_id grid limit", "constraints/indexing_overflow"),
        ("masked load other value out of bounds", "constraints/masking"),
        ("tl.dot minimum K tf32 accumulator", "constraints/tl_dot"),
        ("grouped ordering L2 matmul tiles", "guidance/matmul_tiling"),
        ("broadcast user candidate index epilogue", "guidance/ikbo_broadcast"),
        ("causal block skipping flash attention", "guidance/attention"),
        ("interpreter does not catch races", "constraints/interpreter"),
    ],
)
def test_focused_queries_find_their_document(kb, query, expected):
    assert kb.search(query, kind=expected.split("/")[0])[0].ref == expected


def test_hardware_filter_excludes_other_gpus_and_keeps_any(kb):
    query = "wavefront LDS XCD shared memory registers"
    unfiltered = kb.search(query, limit=None)
    assert unfiltered[0].ref in {"hardware/mi300x", "hardware/mi350"}  # AMD words, AMD documents
    hits = kb.search(query, hardware="h200", limit=None)
    assert hits and all(d.applies_to_hardware("h200") for d in hits)
    assert not any(d.kind == "hardware" and d.name != "h200" for d in hits)
    assert any("any" in d.hardware for d in hits)  # general documents still match every GPU
    assert "hardware/mi300x" in [d.ref for d in kb.search(query, hardware="MI300X", limit=None)]
    only_hw = kb.search("", kind="hardware", hardware="h200", limit=None)
    assert [d.ref for d in only_hw] == ["hardware/h200"]


def test_family_and_tag_filters(kb):
    for d in kb.search("tiles", family="matmul", limit=None):
        assert "matmul" in d.family or "any" in d.family
    tagged = kb.search("", tags=["TMA"], limit=None)
    assert tagged and all("tma" in d.tags for d in tagged)
    assert {d.name for d in tagged} >= {"h100", "h200", "b200"}
    with pytest.raises(KnowledgeError, match="unknown kind"):
        kb.search("x", kind="recipes")


def test_bm25_prefers_title_and_rarer_terms_and_drops_non_matches(tmp_path):
    write(tmp_path, "guidance/a.md", md("Split reductions", "guidance", "how to split a long row. " * 3))
    write(tmp_path, "guidance/b.md", md("Elementwise", "guidance", "mentions reductions once among many words " * 5))
    write(tmp_path, "guidance/c.md", md("Unrelated", "guidance", "nothing relevant here at all"))
    kb = KnowledgeBase.load(tmp_path)
    ranked = kb.rank("split reduction")
    assert [d.name for d, _ in ranked] == ["a", "b"]  # c matches no term and is left out
    assert ranked[0][1] > ranked[1][1] > 0
    assert [d.name for d in kb.search("", limit=2)] == ["a", "b"]  # empty query: filters only


def test_load_is_cached_per_root_and_fresh_rereads(tmp_path):
    write(tmp_path, "constraints/x.md", md("First", "constraints", "alpha"))
    first = KnowledgeBase.load(tmp_path)
    assert KnowledgeBase.load(tmp_path) is first
    write(tmp_path, "constraints/y.md", md("Second", "constraints", "beta"))
    assert len(KnowledgeBase.load(tmp_path)) == 1
    assert len(KnowledgeBase.load(tmp_path, fresh=True)) == 2


def test_get_by_name_and_ambiguity(tmp_path):
    write(tmp_path, "constraints/softmax.md", md("Softmax rules", "constraints", "rules"))
    write(tmp_path, "guidance/softmax.md", md("Softmax speed", "guidance", "speed"))
    kb = KnowledgeBase.load(tmp_path)
    assert kb.get("guidance/softmax").title == "Softmax speed"
    assert kb.get("nothing") is None
    with pytest.raises(KnowledgeError, match="ambiguous.*constraints/softmax.*guidance/softmax"):
        kb.get("softmax")


# -- malformed documents --------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel, text, message",
    [
        ("guidance/g.md", "# no header\n", "no front matter"),
        ("guidance/g.md", "---\ntitle: x\nkind: guidance\n", "not closed"),
        ("guidance/g.md", "---\ntitle: [unclosed\n---\nbody\n", "not valid YAML"),
        ("guidance/g.md", "---\ntitle: x\nkind: guidance\ntags: []\n---\n", "lacks hardware, family"),
        ("guidance/g.md", md("x", "hardware", "b"), "says kind 'hardware' but the file is in guidance/"),
        ("guidance/g.md", md("x", "guidance", "b", tags="fast"), "`tags` must be a list"),
        ("guidance/g.md", md("x", "guidance", "b", hardware="[]"), "`hardware` is empty"),
        ("kernels/k.py", "import triton\n", "no module docstring"),
        ("kernels/k.py", "def broken(:\n", "line 1"),
    ],
)
def test_malformed_document_gives_one_line_error_naming_the_file(tmp_path, rel, text, message):
    write(tmp_path, "constraints/good.md", md("Fine", "constraints", "ok"))
    bad = write(tmp_path, rel, text)
    with pytest.raises(KnowledgeError) as err:
        KnowledgeBase.load(tmp_path)
    assert str(bad) in str(err.value) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_kernel_front_matter_lives_in_the_module_docstring(tmp_path):
    src = '"""\n---\ntitle: Tiny copy\nkind: kernels\ntags: [copy]\nhardware: [any]\nfamily: [elementwise]\nspec: tiny\n---\nCopies x.\n"""\nimport triton\n'
    write(tmp_path, "kernels/tiny_copy.py", src)
    write(tmp_path, "kernels/_helpers.py", "x = 1\n")  # private helpers are skipped
    kb = KnowledgeBase.load(tmp_path)
    doc = kb.reference_kernel("tiny")  # by spec name
    assert doc is kb.reference_kernel("tiny_copy") and doc.body == "Copies x." and doc.source == src
    assert len(kb) == 1


# -- for_spec -------------------------------------------------------------------------------


def spec(name="rmsnorm", family="rmsnorm", hardware="h200", **kw) -> Spec:
    return Spec(name=name, family=family, hardware=hardware, reference=SHIPPED / "missing_ref.py", **kw)


def test_for_spec_picks_hardware_constraints_guidance_and_kernel(kb):
    found = kb.for_spec(spec(description="RMSNorm over the last dim of a bf16 tensor", tags=["reduction"]), limit=2)
    assert found.hardware.ref == "hardware/h200"
    assert len(found.constraints) == 2 and all(d.kind == "constraints" for d in found.constraints)
    assert found.guidance[0].ref == "guidance/memory_bound_reductions"
    assert found.kernel.name == "rmsnorm"  # the shipped reference kernel for the spec of the same name
    assert [d.ref for d in found.documents][0] == "hardware/h200"
    assert found.text.startswith("## ") and found.hardware.title in found.text


def test_for_spec_matmul_family_gets_matmul_knowledge_and_amd_hardware(kb):
    found = kb.for_spec(
        spec(name="gemm_fused", family="matmul", hardware="mi300x", description="bf16 matmul with bias")
    )
    assert found.hardware.name == "mi300x"
    assert found.guidance[0].ref == "guidance/matmul_tiling"
    assert found.constraints[0].ref == "constraints/tl_dot"
    assert all(d.applies_to_hardware("mi300x") for d in found.documents)


def test_for_spec_falls_back_to_a_kernel_of_the_same_family(tmp_path):
    write(
        tmp_path,
        "kernels/norm_ref.py",
        '"""\n---\ntitle: Norm\nkind: kernels\ntags: []\nhardware: [any]\nfamily: [rmsnorm]\nspec: norm_ref\n---\nRMSNorm.\n"""\n',
    )
    kb = KnowledgeBase.load(tmp_path)
    assert kb.for_spec(spec(name="my_norm")).kernel.name == "norm_ref"
    assert kb.for_spec(spec(name="my_norm"), include_kernel=False).kernel is None
    assert kb.for_spec(spec(name="other", family="softmax")).kernel is None
    assert kb.for_spec(spec()).hardware is None  # no hardware folder: nothing, not an error


# -- CLI ------------------------------------------------------------------------------------


@pytest.fixture
def shipped_default():
    # Through --kb's own setter: patching paths.KNOWLEDGE_BASE (read lazily by a module __getattr__) would
    # leave a fixed attribute behind on undo, and later tests' --kb would no longer be seen.
    paths.use_knowledge_base(SHIPPED)
    yield
    paths.use_knowledge_base(None)


def test_cli_search_json_with_filters(shipped_default):
    result = CliRunner().invoke(
        app,
        [
            "kb",
            "search",
            "online softmax split row",
            "--kind",
            "guidance",
            "--hardware",
            "h200",
            "--limit",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert len(hits) == 2 and hits[0]["ref"] == "guidance/memory_bound_reductions"
    assert hits[0]["score"] >= hits[1]["score"] > 0


def test_cli_search_table_and_show(shipped_default):
    runner = CliRunner()
    table = runner.invoke(app, ["kb", "search", "int32 overflow", "--kind", "constraints"])
    assert table.exit_code == 0 and "constraints/indexing_overflow" in table.stdout
    shown = runner.invoke(app, ["kb", "show", "h200"])
    assert shown.exit_code == 0 and "4249" in shown.stdout and shown.stdout.startswith("## NVIDIA H200")
    missing = runner.invoke(app, ["kb", "show", "no_such_doc"])
    assert missing.exit_code == 2 and "no document named 'no_such_doc'" in missing.stderr
    bad_kind = runner.invoke(app, ["kb", "search", "x", "--kind", "recipes"])
    assert bad_kind.exit_code == 2 and "unknown kind" in bad_kind.stderr


def test_cli_entry_point_reports_a_malformed_knowledge_base_in_one_line(tmp_path):
    bad = write(tmp_path, "guidance/broken.md", "---\ntitle: x\n")
    env = {**os.environ, "KERNELEVOLVE_KB": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", "kb", "search", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and str(bad.name) in lines[0] and "Traceback" not in proc.stderr


# -- retrieval by what the reference computes ----------------------------------------------

PROBLEMS = paths.REPO_ROOT / "tests" / "operators" / "problems"  # KernelBench-style modules, no spec
UNRELATED = {"int8_mqa_attention", "ikbo_broadcast", "mbdt", "conv1d", "block_diag_attention", "optimized_fm"}


@pytest.mark.parametrize(
    "name, families, shown",
    [
        ("layer_norm", ("layernorm",), "nn.LayerNorm"),
        ("cross_entropy_loss", ("cross_entropy",), "F.cross_entropy"),
        ("cumsum", ("scan",), "torch.cumsum"),
        ("gemm_leaky_relu", ("matmul",), "nn.LeakyReLU"),
        ("matmul_gelu_softmax", ("matmul", "softmax"), "F.gelu"),  # a softmax epilogue, not attention
        ("causal_self_attention", ("attention", "matmul", "softmax"), "F.softmax"),  # q @ k^T, softmax, @ v
    ],
)
def test_the_operator_family_is_read_from_the_reference(name, families, shown):
    from kernelevolve.knowledge.traits import infer

    traits = infer((PROBLEMS / f"{name}.py").read_text())
    assert traits.families == families and shown in traits.evidence
    assert traits.describe().startswith(f"{families[0]} (the reference calls ")
    # A spec's own family comes first; the reference's follow.
    assert infer((PROBLEMS / f"{name}.py").read_text(), "my_family").families[0] == "my_family"


def _picks(kb, name: str, budget: int, draft: bool):
    from kernelevolve.spec import load_spec

    spec = load_spec(PROBLEMS / f"{name}.py")
    return kb.select(spec, budget_chars=budget, draft=draft)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("layer_norm", {"guidance/memory_bound_reductions"}),
        ("cross_entropy_loss", {"guidance/memory_bound_reductions", "kernels/cross_entropy"}),
        ("gemm_leaky_relu", {"guidance/matmul_tiling", "constraints/tl_dot"}),
        ("matmul_gelu_softmax", {"guidance/matmul_tiling", "constraints/tl_dot", "guidance/memory_bound_reductions"}),
        ("causal_self_attention", {"guidance/attention", "constraints/tl_dot"}),
    ],
)
def test_retrieval_fills_the_budget_with_the_familys_documents(kb, name, expected):
    """Was: int8 MQA, IKBO, MBDT and conv1d documents made up most of the LayerNorm, cross-entropy
    and GEMM prompts, and the matmul-tiling, cross-entropy and reduction documents were missing."""
    found = _picks(kb, name, 17_000, draft=True)
    refs = {p.doc.ref for p in found.picks}
    assert expected <= refs, found.carried()
    assert found.used_chars <= 17_000
    own = set(found.traits.own())
    for pick in found.picks:
        assert pick.doc.name not in UNRELATED, found.carried()
        named = set(pick.doc.family) - {"any"}
        if named and not named & own and pick.doc.kind != "hardware":  # another family: it outscored them all
            best_own = max(p.score for p in found.picks if p.doc.kind == pick.doc.kind and set(p.doc.family) & own)
            assert pick.score > best_own and "above the best of the family's own" in pick.why
    assert found.picks[0].why.startswith("family ") or found.picks[0].why == "the spec's reference kernel"
    # An improve prompt's smaller budget still starts with the family's guidance.
    smaller = _picks(kb, name, 6_000, draft=False)
    assert smaller.picks and smaller.picks[0].why.startswith("family ") and smaller.used_chars <= 6_000


def test_another_familys_document_goes_in_only_above_the_familys_own(tmp_path):
    from kernelevolve.spec import load_spec

    words = "layernorm normalization row reduction mean variance"
    write(
        tmp_path, "guidance/own.md", md("Row norms", "guidance", f"{words} " + "plain text " * 60, family="[layernorm]")
    )
    write(
        tmp_path, "guidance/strong.md", md("Other", "guidance", f"{words} {words} " + "x " * 60, family="[attention]")
    )
    write(tmp_path, "guidance/weak.md", md("Weak", "guidance", "reduction " + "y " * 60, family="[mbdt]"))
    write(tmp_path, "constraints/lonely.md", md("Lonely", "constraints", f"{words} " + "z " * 60, family="[gemm]"))
    write(tmp_path, "constraints/general.md", md("General", "constraints", "mean " + "w " * 60))
    kb = KnowledgeBase.load(tmp_path, fresh=True)
    spec = load_spec(PROBLEMS / "layer_norm.py")
    found = kb.select(spec, budget_chars=100_000)
    why = {p.doc.ref: p.why for p in found.picks}
    assert why["guidance/own"] == "family layernorm"
    assert why["constraints/general"] == "general"
    assert why["guidance/strong"].startswith("family attention, above the best of the family's own guidance")
    assert "guidance/weak" not in why  # scored below the family's own document
    assert "constraints/lonely" not in why  # no constraints of the family to beat: an unrelated family stays out
    # A document that does not fit the budget is left out and said so.
    tight = kb.select(spec, budget_chars=len(kb.get("guidance/own").text) + 10)
    assert [p.doc.ref for p in tight.picks] == ["guidance/own"]
    assert "guidance/strong" in {p.doc.ref for p in tight.left_out}
