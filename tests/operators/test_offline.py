"""The offline operator on the real knowledge-base kernels (no model, no key)."""

import random

import pytest

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.operators import OperatorError, resolve_operator
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.operators.offline import OfflineOperator
from kernelevolve.operators.tunables import config_key, read_declared
from kernelevolve.paths import SPECS
from kernelevolve.spec import load_spec


def _ctx(spec, seed=0, **kw):
    return OperatorContext(spec=spec, run_id="r-test", device="cuda", rng=random.Random(seed), **kw)


def _timed(fitness):
    s = ShapeResult(
        label="M=8,N=8 bfloat16", params={}, dtype="bfloat16", correct=True, latency_ms=1.0 / fitness, baseline_ms=1.0
    )
    return EvalResult(correct=True, shapes=[s], device="cuda", timed=True)


@pytest.fixture
def rmsnorm():
    return load_spec(SPECS / "rmsnorm.yaml")


def test_no_model_means_offline(monkeypatch):
    monkeypatch.delenv("KERNELEVOLVE_MODEL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-present-but-not-chosen")
    assert resolve_operator(None).name == "offline"


def test_draft_is_the_reference_kernel_then_untried_configs(rmsnorm, test_kb):
    kb, reference = test_kb
    op = OfflineOperator(kb)
    first = op.draft(rmsnorm, _ctx(rmsnorm))
    assert first.source == reference
    second = op.draft(rmsnorm, _ctx(rmsnorm))
    assert second.source != reference and read_declared(second.source).config != read_declared(reference).config
    assert "->" in second.note


def test_improve_is_reproducible_from_the_rng_and_never_repeats(rmsnorm, test_kb):
    kb, reference = test_kb
    parent = ParentView(1, reference, "draft", _timed(1.0))
    a = OfflineOperator(kb).improve([parent], _ctx(rmsnorm, seed=7))
    b = OfflineOperator(kb).improve([parent], _ctx(rmsnorm, seed=7))
    assert a.source == b.source and a.note == b.note and "->" in a.note
    op, seen = OfflineOperator(kb), {config_key(read_declared(reference).config)}
    for i in range(25):
        p = op.improve([parent], _ctx(rmsnorm, seed=i))
        key = config_key(read_declared(p.source).config)
        assert key not in seen
        seen.add(key)


def test_optimise_keeps_going_in_a_direction_that_paid_off(rmsnorm, test_kb):
    kb, reference = test_kb
    from kernelevolve.operators.tunables import rewrite_config

    before = ParentView(1, reference, "draft", _timed(1.0))  # tile_elems 4096
    better = ParentView(2, rewrite_config(reference, {"tile_elems": 8192}), "improve", _timed(1.2))
    p = OfflineOperator(kb).improve([better], _ctx(rmsnorm, ancestry=[before]))
    assert read_declared(p.source).config["tile_elems"] == 16384
    assert p.note == "tile_elems 8192->16384"


def test_debug_walks_back_toward_the_last_passing_config(rmsnorm, test_kb):
    kb, reference = test_kb
    from kernelevolve.operators.tunables import rewrite_config

    passing = ParentView(1, reference, "draft", _timed(1.0))
    broken = ParentView(
        2,
        rewrite_config(reference, {"split_block_n": 16384, "num_stages": 3}),
        "improve",
        EvalResult.failed("compile", "out of resource: shared memory"),
    )
    p = OfflineOperator(kb).improve([broken], _ctx(rmsnorm, ancestry=[passing]))
    config = read_declared(p.source).config
    assert (config["split_block_n"], config["num_stages"]) in ((4096, 3), (16384, 1))
    assert p.note.startswith("toward #1 (last passing)")


def test_crossover_takes_knobs_from_both_parents(rmsnorm, test_kb):
    kb, reference = test_kb
    from kernelevolve.operators.tunables import rewrite_config

    a = ParentView(1, rewrite_config(reference, {"tile_elems": 8192, "max_warps": 8}), "improve", _timed(1.3))
    b = ParentView(2, rewrite_config(reference, {"split_block_n": 8192, "num_stages": 2}), "improve", _timed(1.1))
    p = OfflineOperator(kb).improve([a, b], _ctx(rmsnorm))
    child = read_declared(p.source).config
    mixed = {
        k
        for k in ("tile_elems", "max_warps", "split_block_n", "num_stages")
        if child[k] != read_declared(reference).config[k]
    }
    assert child not in (read_declared(a.source).config, read_declared(b.source).config)
    assert "from #2" in p.note and mixed


def test_no_code_parent_restarts_from_the_reference(rmsnorm, test_kb):
    p = OfflineOperator(test_kb[0]).improve(
        [ParentView(4, None, "draft", EvalResult.failed("no_code", "no kernel"))], _ctx(rmsnorm)
    )
    assert "class ModelNew" in p.source and "restart from the reference" in p.note


def test_spec_without_reference_kernel_names_the_providers_that_could_serve_it(tmp_path):
    ref = tmp_path / "gelu.py"
    ref.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n"
    )
    spec = load_spec(ref)
    with pytest.raises(OperatorError) as e:
        OfflineOperator().draft(spec, _ctx(spec))
    message = str(e.value)
    assert "no reference kernel" in message and "\n" not in message
    for provider in ("anthropic:", "openai:", "file:DIR"):
        assert provider in message
