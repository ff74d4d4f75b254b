"""Finding a suite's problems, the interpreter shape rule and per-problem --shape (in process, no evaluation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelevolve.campaign.problems import (
    ProblemError,
    choose_shapes,
    find_problem_files,
    load_problems,
    match_solutions,
    parse_problem_shapes,
)
from kernelevolve.campaign.scaling import MAX_SIZE, scaled_shape
from kernelevolve.shapes import constants

HERE = Path(__file__).parent
PROBLEMS = HERE / "problems"
SPECS = HERE.parents[1] / "specs"


def test_scaling_keeps_small_constants_and_the_divisibility_the_code_relies_on():
    source = (PROBLEMS / "groupnorm.py").read_text()
    shape = scaled_shape(source)
    small = constants(source, shape)
    assert small["num_groups"] == 8  # at or below 16: as written
    assert small["features"] % small["num_groups"] == 0  # GroupNorm needs channels divisible by groups
    assert small["dim1"] == small["dim2"] == 16  # `dim1 = dim2 = 256`: a chained assignment, both scaled
    conv = scaled_shape((PROBLEMS / "conv2d.py").read_text())
    assert "kernel_size" not in conv and "in_channels" not in conv  # 3 stays 3
    # odd sizes: 48 divides 96 (not 4096), so their scaled values keep dividing
    odd = constants("A = 48\nB = 4096\nC = 96\nD = B * 2\n", scaled_shape("A = 48\nB = 4096\nC = 96\nD = B * 2\n"))
    assert odd["C"] % odd["A"] == 0 and odd["B"] == 64
    assert odd["D"] == 2 * odd["B"]  # derived: follows its root, never scaled on its own
    # a list of sizes (KernelBench's MLP: its hidden layers) scales like a tuple and stays a list
    mlp = "batch_size = 128\ninput_size = 16384\nlayer_sizes = [16384, 16384]\noutput_size = 8192\n"
    small = constants(mlp, scaled_shape(mlp))
    assert small["layer_sizes"] == [small["input_size"]] * 2 and small["input_size"] <= MAX_SIZE


def test_scaling_shrinks_every_problem_file_to_interpreter_sizes():
    for path in sorted(PROBLEMS.glob("*.py")):
        source = path.read_text()
        shape = scaled_shape(source)
        assert shape, path.name  # each test problem is written for a large GPU
        for name, value in shape.items():
            values = value if isinstance(value, tuple) else (value,)
            assert all(v <= MAX_SIZE for v in values), (path.name, name, value)
        assert scaled_shape("\n".join(f"{k} = {v!r}" for k, v in shape.items())) == {}  # small already: unchanged


def test_a_directory_of_specs_is_its_yamls_and_a_glob_is_its_files():
    files = find_problem_files([str(SPECS)])
    assert all(p.suffix == ".yaml" for p in files)  # each spec's reference module belongs to its YAML
    assert {p.stem for p in find_problem_files([str(PROBLEMS / "m*.py")])} == {"matmul", "max_dim2", "mean_dim0"}
    with pytest.raises(ProblemError, match="two problems are named 'relu'"):
        load_problems([str(PROBLEMS / "relu.py"), str(_copy(PROBLEMS / "relu.py"))])


def _copy(path: Path) -> Path:
    import tempfile

    target = Path(tempfile.mkdtemp()) / path.name
    target.write_text(path.read_text())
    return target


def test_shape_sources_per_problem():
    problems = {
        p.name: p
        for p in load_problems([str(SPECS / "softmax.yaml"), str(PROBLEMS / "matmul.py"), str(PROBLEMS / "relu.py")])
    }
    overrides = parse_problem_shapes(["relu:batch_size=2,dim=40", "relu:batch_size=3,dim=7"], list(problems.values()))
    for p in problems.values():
        choose_shapes(p, "interpret", overrides.get(p.name))
    assert problems["relu"].shape_rule == "--shape"
    assert problems["relu"].shapes_text("interpret") == "batch_size=2,dim=40; batch_size=3,dim=7"
    assert problems["softmax"].shape_rule == "the spec's interpret_shapes" and problems["softmax"].shapes is None
    assert problems["matmul"].shapes_text("interpret") == "M=32,K=64,N=64"
    choose_shapes(problems["matmul"], "cuda", None)
    assert problems["matmul"].shape_rule == "the module's constants"


def test_solution_files_match_by_problem_or_kernel_name(tmp_path):
    (tmp_path / "RELU.py").write_text("# a kernel")
    (tmp_path / "softmax.py").write_text("# a kernel")
    problems = load_problems([str(PROBLEMS / "relu.py"), str(PROBLEMS / "matmul.py"), str(SPECS / "softmax.yaml")])
    match_solutions(problems, tmp_path)
    assert [p.solution and p.solution.name for p in problems] == ["RELU.py", None, "softmax.py"]
