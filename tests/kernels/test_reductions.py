"""The RMSNorm, softmax and cross-entropy reference kernels under the Triton interpreter.

Each check draws random inputs from a seed of its own (in its failure message, and drawn from the
test's seed: tests/seeding.py), runs ModelNew with torch.empty & co. handing out NaN-filled memory
(so an unwritten element fails), and compares with the spec's reference module run in float64 on
the same rounded inputs, within the spec's per-dtype tolerances. Small CONFIG thresholds (values
from TUNABLES) send small rows down the long-row kernels, so every kernel of every file runs.
"""

from __future__ import annotations

import ast
import copy
import inspect
import random
import warnings

import pytest
import torch

from kernelevolve.knowledge.frontmatter import kernel_docstring, split_front_matter
from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS
from kernelevolve.spec import load_spec

from .conftest import LaunchSpy, load_kernel, load_reference, poisoned_allocations  # noqa: E402

KERNELS = ["rmsnorm", "softmax", "cross_entropy"]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Overrides (all TUNABLES values) that send rows longer than 1024 down the long-row kernels in
# tiles of 1024: the chunked kernel (default) and the one-program-per-row two-pass kernel.
LONG = {"single_block_max_n": 1024, "split_block_n": 1024}
PATHS = {
    "tile": ({}, [(4, 256), (3, 1000)]),  # 1000: a masked tail inside one tile
    # 3 chunks (the last partial); 1 chunk. A program per row and chunk: two rows take the same launch as three.
    "chunked": (dict(LONG, chunk_n=4096), [(2, 9000), (2, 2500)]),
    "two-pass": (dict(LONG, chunk_n=0), [(3, 2500)]),  # three tiles, the last one partial
    "two-pass-persistent": (dict(LONG, chunk_n=0, split_programs_per_sm=1), [(9, 1100)]),  # 4 programs x 3 rows
}


def make_case(name: str, m: int, n: int, dtype: torch.dtype, seed: int):
    """(reference model, init args, inputs) at shape (m, n), inputs rounded to `dtype`."""
    torch.manual_seed(seed)
    if name == "rmsnorm":
        init, inputs = [n, 1e-6], [torch.randn(m, n)]
    elif name == "softmax":
        init, inputs = [], [4.0 * torch.randn(m, n)]
    else:
        target = torch.randint(0, n, (m,))
        target[0] = -100  # an ignored row in every case
        init, inputs = [-100], [3.0 * torch.randn(m, n), target]
    inputs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
    model = load_reference(name).Model(*init)
    with torch.no_grad():
        for p in model.parameters():  # a weight far from all-ones
            p.mul_(1 + 0.5 * torch.rand_like(p)).add_(0.05 * torch.randn_like(p))
    return model.to(dtype), init, inputs


def check(kernel, name: str, m: int, n: int, dtype_name: str, seed: int, as_input=torch.clone) -> list[torch.Tensor]:
    """Runs the case; returns the inputs ModelNew was given (`as_input` of each input)."""
    dtype = DTYPES[dtype_name]
    model, init, inputs = make_case(name, m, n, dtype, seed)
    new = kernel.ModelNew(*init)
    new.load_state_dict(model.state_dict())
    new = new.to(dtype)
    given = [as_input(x) for x in inputs]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy under the interpreter: exp2(-inf) etc.
        with poisoned_allocations():
            out = new(*given)
        expected = model(*inputs)  # the dtype and shape a candidate must produce
        ref = copy.deepcopy(model).double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    where = f"{name} M={m} N={n} {dtype_name} seed={seed}"
    assert out.shape == expected.shape and out.dtype == expected.dtype, f"{where}: {out.shape} {out.dtype}"
    tol = load_spec(SPECS / f"{name}.yaml").tolerance(dtype_name)
    got = out.double()
    assert torch.isfinite(got).all(), f"{where}: {(~torch.isfinite(got)).sum().item()} NaN/Inf (unwritten?)"
    err = (got - ref).abs()
    bad = err > tol.atol + tol.rtol * ref.abs()
    assert not bad.any(), f"{where}: {bad.sum().item()} elements out of tolerance, max abs err {err.max().item():.3g}"
    return given


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("name", KERNELS)
def test_matches_float64_reference(name, dtype_name, path, tmp_path):
    config, shapes = PATHS[path]
    kernel = load_kernel(name, tmp_path, **config)
    for m, n in shapes:
        check(kernel, name, m, n, dtype_name, random.randrange(2**31))


# The cooperative kernel (RMSNorm, softmax) waits for a row's other chunks, so under the
# interpreter it may only run with one chunk a row: rows of 9000 and 2500 in chunks of 16384.
# M=5 on the interpreter's 4 "SMs" gives 3 row groups x 2 iterations, the last with a padding row.
COOPERATIVE = (dict(LONG, chunk_n=16384, cooperative=True), [(5, 9000), (3, 2500)])


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("name", ["rmsnorm", "softmax"])
def test_cooperative_kernel_matches_float64_reference(name, dtype_name, tmp_path):
    config, shapes = COOPERATIVE
    kernel = load_kernel(name, tmp_path, **config)
    for m, n in shapes:
        check(kernel, name, m, n, dtype_name, random.randrange(2**31))


@pytest.mark.parametrize("name", ["rmsnorm", "softmax"])
def test_cooperative_kernel_never_waits_under_the_interpreter(name, tmp_path):
    """With several chunks a row its programs would wait for each other, which the interpreter
    (programs one after another) cannot do: the launcher must take the non-waiting chunked kernel."""
    kernel = load_kernel(name, tmp_path, **dict(LONG, chunk_n=16384, cooperative=True))

    class Forbidden:
        def __getitem__(self, grid):
            raise AssertionError("cooperative kernel launched with several chunks a row under the interpreter")

    setattr(kernel, f"_{name}_coop_kernel", Forbidden())
    check(kernel, name, 2, 20000, "bfloat16", random.randrange(2**31))  # two chunks a row


def test_cooperative_grid_keeps_every_program_resident(monkeypatch):
    import _launch_heuristics
    from _launch_heuristics import cooperative_grid

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert cooperative_grid(5, 3, cpu) is None and cooperative_grid(5, 1, cpu) == (3, 2)  # 4 "SMs" here
    monkeypatch.setattr(_launch_heuristics, "sm_count", lambda device: 132)  # an H200, without one
    assert cooperative_grid(2048, 4, cuda) is None  # still interpreted: nobody may wait
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    for m, n_chunks in [(2048, 4), (1024, 16), (300, 7), (4096, 1), (3, 8)]:
        groups, iters = cooperative_grid(m, n_chunks, cuda)
        assert groups * n_chunks <= 132 and groups * iters >= m and groups * (iters - 1) < m, (m, n_chunks)
    assert cooperative_grid(2048, 2, cuda) == (64, 32)  # 2048 rows in 32 full waves, not 31 and a sliver
    assert cooperative_grid(10, 133, cuda) is None  # more chunks than SMs could deadlock


def in_wider_rows(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values as a view whose rows lie further apart than they are long: logits and x as
    x[:, :N] of a tensor 40 columns wider, targets as every other element of a longer vector. What
    lies between is NaN (or an out-of-range target), so a kernel that reads it fails the check."""
    if t.dim() == 1:
        wide = torch.full((t.shape[0], 2), -7, dtype=t.dtype)
        wide[:, 0] = t
        return wide[:, 0]
    wide = torch.full((t.shape[0], t.shape[1] + 40), float("nan"), dtype=t.dtype)
    wide[:, : t.shape[1]] = t
    return wide[:, : t.shape[1]]


STRIDED_CASES = [
    (name, path, config, shapes[0])
    for name in KERNELS
    for path, (config, shapes) in [*PATHS.items(), ("cooperative", COOPERATIVE)]
    if not (name == "cross_entropy" and path == "cooperative")
]


@pytest.mark.parametrize("name, path, config, shape", STRIDED_CASES, ids=[f"{c[0]}-{c[1]}" for c in STRIDED_CASES])
def test_rows_of_a_wider_tensor_are_read_in_place(name, path, config, shape, tmp_path):
    """x[:, :N] (row stride N + 40) gives the float64 reference's result on every path, and the
    kernel reads the caller's memory itself: its launch gets the very tensors the caller passed."""
    kernel = load_kernel(name, tmp_path, **config)
    spies = {attr: LaunchSpy(getattr(kernel, attr)) for attr in dir(kernel) if attr.endswith("_kernel")}
    for attr, spy in spies.items():
        setattr(kernel, attr, spy)
    given = check(kernel, name, *shape, "float32", random.randrange(2**31), as_input=in_wider_rows)
    launched = [(attr, args) for attr, spy in spies.items() for args in spy.launches]
    assert len(launched) == 1, [attr for attr, _ in launched]
    attr, args = launched[0]
    assert (path == "cooperative") == ("coop" in attr), attr  # the path the case is named for ran
    data = [t for t in given if t.is_floating_point()][0]
    assert args[0].data_ptr() == data.data_ptr() and args[0].stride() == data.stride(), "input copied"
    if name == "cross_entropy":
        assert args[1].data_ptr() == given[1].data_ptr() and args[1].stride() == (2,), "targets copied"


def test_rows_are_copied_only_when_their_elements_are_not_adjacent():
    from _launch_heuristics import unit_stride_rows

    wide = torch.randn(2, 3, 50)
    rows = unit_stride_rows(wide[..., :40])  # leading dimensions merge: a view, rows 50 apart
    assert rows.shape == (6, 40) and rows.stride() == (50, 1) and rows.data_ptr() == wide.data_ptr()
    columns = torch.randn(40, 6).t()  # a transposed matrix: a row's elements are 6 apart
    rows = unit_stride_rows(columns)
    assert rows.is_contiguous() and torch.equal(rows, columns)


@pytest.mark.parametrize("name", KERNELS)
def test_sampled_tunables_combinations_are_correct(name, tmp_path, seed):
    """The search may write any TUNABLES combination into CONFIG: all must stay correct."""
    declared = read_declared((KNOWLEDGE_BASE / "kernels" / f"{name}.py").read_text())
    rng = random.Random(seed)
    combos = [{k: min(v) for k, v in declared.tunables.items()}, {k: max(v) for k, v in declared.tunables.items()}]
    combos += [{k: rng.choice(v) for k, v in declared.tunables.items()} for _ in range(4)]
    for combo in combos:
        kernel = load_kernel(name, tmp_path, **combo)
        for m, n in [(5, 300), (2, 9000)]:
            seed = rng.randrange(2**31)
            try:
                check(kernel, name, m, n, "bfloat16", seed)
            except AssertionError as exc:
                raise AssertionError(f"CONFIG {combo}: {exc}") from None


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_file_follows_the_reference_kernel_convention(name):
    path = KNOWLEDGE_BASE / "kernels" / f"{name}.py"
    source = path.read_text()
    header, body = split_front_matter(kernel_docstring(source, path), path)
    assert header["kind"] == "kernels" and header["spec"] == name and name in header["family"]
    assert "memory-bound" in header["tags"] and body.strip()
    assert load_spec(SPECS / f"{name}.yaml").kernel_name == name
    imported = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= {
        "torch",
        "torch.nn",
        "triton",
        "triton.language",
        "math",
        "_launch_heuristics",
        "_bf16_pairs",
        "_row_io",
        "_row_models",
    }, imported
    declared = read_declared(source)
    assert set(declared.tunables) == set(declared.config)
    for key, value in declared.config.items():
        assert value in declared.tunables[key], f"CONFIG[{key!r}] = {value!r} is not among its TUNABLES"
    kernel, reference = load_kernel(name), load_reference(name)
    assert inspect.signature(kernel.ModelNew.__init__) == inspect.signature(reference.Model.__init__)


def test_rmsnorm_keeps_leading_dimensions_and_reads_strided_input():
    kernel = load_kernel("rmsnorm")
    torch.manual_seed(random.randrange(2**31))
    model, new = load_reference("rmsnorm").Model(200), kernel.ModelNew(200)
    new.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 400)[..., ::2]  # non-contiguous last dimension
    with torch.no_grad(), poisoned_allocations():
        out = new(x)
    assert out.shape == (2, 3, 200)
    torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "config",
    [{}, PATHS["chunked"][0], PATHS["two-pass"][0], COOPERATIVE[0]],
    ids=["tile", "chunked", "two-pass", "cooperative"],
)
def test_softmax_handles_minus_infinity_like_torch(config, tmp_path):
    kernel = load_kernel("softmax", tmp_path, **config)
    x = torch.randn(3, 9000)
    x[0, ::3] = float("-inf")  # masked positions
    x[1, 4000:] = float("-inf")  # a masked tail: whole tiles and chunks of -inf
    x[2] = float("-inf")  # nothing left: torch gives NaN
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = kernel.ModelNew()(x)
    ref = torch.softmax(x.double(), dim=-1)
    torch.testing.assert_close(out[:2].double(), ref[:2], atol=1e-7, rtol=1e-5)
    assert (out[0, ::3] == 0).all() and torch.isnan(out[2]).all()


@pytest.mark.parametrize("config", [{}, PATHS["chunked"][0], PATHS["two-pass"][0]], ids=["tile", "chunked", "two-pass"])
def test_cross_entropy_ignored_and_out_of_range_targets(config, tmp_path):
    kernel = load_kernel("cross_entropy", tmp_path, **config)
    logits = 3.0 * torch.randn(4, 9000)
    target = torch.tensor([7, -100, 9000, 8999])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        loss = kernel.ModelNew()(logits, target)
    assert loss.dtype == torch.float32 and loss[1] == 0 and torch.isnan(loss[2])  # 9000 is past V - 1
    ref = load_reference("cross_entropy").Model()(logits.double(), torch.tensor([7, -100, 0, 8999]))
    torch.testing.assert_close(loss[[0, 3]].double(), ref[[0, 3]], atol=1e-4, rtol=1e-5)
    with pytest.raises(ValueError, match="expected logits"):
        kernel.ModelNew()(logits, target[:3])


def test_cross_entropy_long_rows_take_the_wide_split_tiles(tmp_path, monkeypatch):
    """Rows of at least CONFIG["long_n"] go through the split kernel with long_split_block_n-wide tiles
    and long_split_num_warps warps (shorter rows keep split_block_n / split_num_warps), and stay correct."""
    kernel = load_kernel("cross_entropy", tmp_path, **LONG, chunk_n=0, long_n=65536)
    seen = []

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.append((kwargs["BLOCK_N"], kwargs["num_warps"]))
                return split[grid](*args, **kwargs)

            return launch

    split = kernel._ce_split_kernel
    monkeypatch.setattr(kernel, "_ce_split_kernel", Spy())
    check(kernel, "cross_entropy", 2, 65536, "bfloat16", random.randrange(2**31))
    check(kernel, "cross_entropy", 2, 2500, "bfloat16", random.randrange(2**31))
    assert seen == [(kernel.CONFIG["long_split_block_n"], kernel.CONFIG["long_split_num_warps"]), (1024, 8)]
