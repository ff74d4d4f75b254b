"""The evaluator's contract in the prompts (operators/contract.py) follows the evaluator's own
settings: a spec's tolerances, dtypes, tf32, inplace and allowed torch ops change it, and what it
says about poisoned allocations, trials, repeated calls and parameter names is what the harness does."""

import textwrap
from pathlib import Path

import pytest
import torch

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.harness.runtime import compare
from kernelevolve.harness.runtime.correctness import REPEAT_CALLS
from kernelevolve.harness.runtime.modules import load_module
from kernelevolve.operators.contract import POISONED, evaluator_contract, reference_state
from kernelevolve.spec import load_spec

PROBLEMS = Path(__file__).parent / "problems"


def _spec(tmp_path, extra: str):
    (tmp_path / "ref.py").write_text((PROBLEMS / "gemm_leaky_relu.py").read_text())
    (tmp_path / "s.yaml").write_text(
        "name: gemm\nreference: ref.py\nshapes: [{batch_size: 256}]\n"
        "interpret_shapes: [{batch_size: 4, in_features: 32, out_features: 48}]\n" + textwrap.dedent(extra)
    )
    return load_spec(tmp_path / "s.yaml")


def test_the_contract_carries_the_specs_own_settings(tmp_path):
    spec = _spec(
        tmp_path,
        """
        dtypes: [float32, bfloat16]
        tolerances:
          float32: {atol: 2.0e-4, rtol: 3.0e-4, norm_rtol: 5.0e-5}
        allow_torch_ops: [pad]
        inplace: true
        tf32: true
        """,
    )
    text = evaluator_contract(spec, "interpret")
    assert "float32: atol 0.0002, rtol 0.0003, norm 5e-05" in text
    assert "bfloat16: atol 0.02, rtol 0.02, norm 0.02" in text  # the default for a dtype the spec leaves out
    assert "bfloat16 (floating inputs and parameters cast to bfloat16" in text
    assert "also allowed for this spec: pad" in text
    assert "the spec's operator is in place" in text and "inputs must be unchanged" not in text
    assert "TF32 is allowed" in text
    assert "(the spec's interpret_shapes): batch_size=4, in_features=32, out_features=48" in text
    assert "so tune for these: batch_size=256, in_features=8192, out_features=8192" in text

    default = evaluator_contract(_spec(tmp_path, ""), "cuda")
    assert 'TF32 is not allowed: a float32 `tl.dot` must pass input_precision="ieee"' in default
    assert "inputs must be unchanged after forward" in default and "also allowed" not in default
    assert "native (inputs and parameters keep the dtypes" in default
    assert "checked and timed on the GPU (h200, against torch.compile; the spec's shapes): batch_size=256" in default
    assert "timed calls get fresh inputs in distinct buffers" in default


def test_trials_and_repeated_calls_are_the_evaluators():
    spec = load_spec(PROBLEMS / "cumsum.py")
    trials = Evaluator(device="interpret").trials
    text = evaluator_contract(spec, "interpret")
    assert f"each of {trials} trials" in text and f"{REPEAT_CALLS} more times" in text
    assert "more times" not in evaluator_contract(spec, "interpret", trials=1)  # one trial: no repeated calls


def test_the_poisoned_allocations_named_are_those_the_harness_poisons():
    names = {"torch.empty": torch, "torch.empty_like": torch, "torch.empty_strided": torch}
    before = {n: getattr(torch, n.split(".")[1]) for n in names} | {"Tensor.new_empty": torch.Tensor.new_empty}
    with compare.poisoned_allocations():
        replaced = {
            n
            for n in before
            if (getattr(torch, n.split(".")[1]) if n.startswith("torch.") else torch.Tensor.new_empty) is not before[n]
        }
        x = torch.zeros(3)
        outs = [torch.empty(3), torch.empty_like(x), torch.empty_strided((3,), (1,)), x.new_empty(3)]
        untouched = torch.zeros(3)
    assert replaced == set(POISONED)
    assert all(torch.isnan(o).all() for o in outs) and not torch.isnan(untouched).any()


@pytest.mark.parametrize("name", ["layer_norm", "gemm_leaky_relu", "matmul_gelu_softmax", "causal_self_attention"])
def test_the_parameter_names_are_the_references_state_dict(name):
    """Read from the source (never executed), checked here against the real module on the meta device."""
    path = PROBLEMS / f"{name}.py"
    module = load_module(str(path), f"contract_ref_{name}")
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
    assert sorted(reference_state(path.read_text())) == sorted(model.state_dict())


def test_parameter_names_follow_bias_and_affine_switches():
    source = textwrap.dedent(
        """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4, bias=False)
                self.norm = nn.LayerNorm(4, elementwise_affine=False)
                self.scale = nn.Parameter(torch.ones(4))
                self.act = nn.GELU()
                self.register_buffer("table", torch.zeros(4))
                self.register_buffer("scratch", torch.zeros(4), persistent=False)
        """
    )
    assert reference_state(source) == ["proj.weight", "scale", "table"]
