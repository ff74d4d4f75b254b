"""Shape overrides on problem files written the way KernelBench writes them:
constant expressions, chained and unpacking assignments, tuple/list values; and the `--shape`
parser. The same code (kernelevolve/shapes.py) checks a value when the spec
is loaded and rewrites the module inside the harness, so both are tested through both."""

import ast
import sys

import pytest

from kernelevolve import shapes
from kernelevolve.harness.runtime.modules import load_module
from kernelevolve.spec import SpecError, load_spec, parse_shape_option

# Before the fix: `N = 2048 * 2` and `height = width = 128` were "not a module-level constant",
# `input_shape=(64,)` could not be given and `input_shape=64` was accepted, then crashed.
PROBLEM = """import torch
import torch.nn as nn

batch_size = 16
N = 2048 * 2
height = width = 128
M, K = 8, 32
input_shape = (4096,)
bias_shape = (N, 1, 1)
scale: float = 0.5


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [N]
"""


@pytest.fixture
def problem(tmp_path):
    path = tmp_path / "99_Problem.py"
    path.write_text(PROBLEM)
    return path


def _load(path, overrides):
    module = load_module(str(path), "shape_test_module", overrides)
    sys.modules.pop("shape_test_module", None)
    return module


def test_constants_are_read_from_expressions_chains_unpacking_and_tuples(problem):
    consts = shapes.constants(PROBLEM)
    assert consts == {
        "batch_size": 16,
        "N": 4096,
        "height": 128,
        "width": 128,
        "M": 8,
        "K": 32,
        "input_shape": (4096,),
        "bias_shape": (4096, 1, 1),
        "scale": 0.5,
    }
    assert shapes.constants(PROBLEM, {"N": 8})["bias_shape"] == (8, 1, 1)  # derived constants follow


def test_spec_accepts_overrides_of_every_kind_and_the_harness_applies_them(problem):
    spec = load_spec(problem)
    for text in (
        "N=64",
        "height=32",
        "M=2,K=4",
        "input_shape=(64,)",
        "input_shape=64,",
        "input_shape=[64]",
        "batch_size=2,input_shape=8,16",
        "scale=1",
        "N=2048*2",
    ):
        shape = parse_shape_option(text)
        spec.check_shape(shape)  # no SpecError
    module = _load(problem, {"N": 64, "height": 32, "K": 4, "input_shape": [64], "scale": 1})
    assert (module.N, module.height, module.width, module.M, module.K) == (64, 32, 128, 8, 4)
    assert module.input_shape == (64,) and isinstance(module.input_shape, tuple)  # JSON's list back to a tuple
    assert module.bias_shape == (64, 1, 1) and module.scale == 1.0
    assert module.get_inputs()[0].shape == (16, 64)
    untouched = _load(problem, None)
    assert (untouched.N, untouched.input_shape) == (4096, (4096,))


@pytest.mark.parametrize(
    "text, message",
    [
        ("input_shape=64", "input_shape=64: a tuple is needed: write input_shape=(64,) or input_shape=64,"),
        ("N=abc", "N='abc': an integer is needed, not a str"),
        ("N=1.5", "an integer is needed, not a float"),
        ("input_shape=(1.5,)", "element 1.5 is a float"),
        ("nope=3", "nope is not a module-level constant of 99_Problem.py (constants: K, M, N, batch_size"),
    ],
)
def test_bad_override_values_are_one_line_errors(problem, text, message):
    spec = load_spec(problem)
    with pytest.raises(SpecError) as err:
        spec.check_shape(parse_shape_option(text))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("M=4096,N=512", {"M": 4096, "N": 512}),
        ("M = 4 , N=2*128", {"M": 4, "N": 256}),
        ("input_shape=64,", {"input_shape": (64,)}),
        ("input_shape=64,128,dim=3", {"input_shape": (64, 128), "dim": 3}),
        ("input_shape=(64,),dim=3", {"input_shape": (64,), "dim": 3}),
        ("input_shape=[64]", {"input_shape": [64]}),
        ("eps=1e-5,flag=True,mode=fast", {"eps": 1e-5, "flag": True, "mode": "fast"}),
    ],
)
def test_shape_option_parsing(text, expected):
    assert parse_shape_option(text) == expected


@pytest.mark.parametrize("text", ["M", "=3", "M=", "3=4"])
def test_malformed_shape_options_are_spec_errors(text):
    with pytest.raises(SpecError) as err:
        parse_shape_option(text)
    assert "--shape" in str(err.value) and "\n" not in str(err.value)


def test_chained_assignment_split_keeps_the_other_name(problem):
    tree = shapes.override_tree(ast.parse(PROBLEM), {"height": 64})
    assert "height = width = 128\nheight = 64" in ast.unparse(tree)


def test_case_labels_read_the_same_for_tuples_and_lists(problem):
    spec = load_spec(problem)
    a = spec.cases("interpret", [{"input_shape": (64,)}])[0].label
    b = spec.cases("interpret", [{"input_shape": [64]}])[0].label
    assert a == b == "input_shape=(64,) native"
