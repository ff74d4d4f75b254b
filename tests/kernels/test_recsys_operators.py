"""The recommendation-model reference kernels (conv1d, optimized_fm, pffn, mbdt) under the
Triton interpreter, against their spec's reference module run in float64.

Inputs come from the reference's own get_inputs() at small shapes (its constants overridden as a
spec shape would), parameters are perturbed away from their initial values, torch.empty & co.
hand out NaN-filled memory while the kernel runs (an unwritten element fails), and the tolerance
is the spec's. CONFIG variants are values from each kernel's TUNABLES chosen to take every code
path: several output tiles in each dimension, ragged tails, both weight layouts, both searches.
"""

from __future__ import annotations

import copy
import random

import pytest
import torch

from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS
from kernelevolve.spec import load_spec

from .conftest import load_kernel, load_reference, poisoned_allocations

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def build(name: str, constants: dict, dtype: torch.dtype, seed: int):
    """(reference module, reference model at `dtype`, inputs at `dtype`), all drawn from `seed`."""
    ref = load_reference(name, **constants)
    torch.manual_seed(seed)
    model = ref.Model(*ref.get_init_inputs())
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + 0.5 * torch.rand_like(p)).add_(0.05 * torch.randn_like(p))
    inputs = [x.to(dtype) if x.is_floating_point() else x for x in ref.get_inputs()]
    return ref, model.to(dtype), inputs


def check(kernel, spec_name: str, constants: dict, dtype_name: str, seed: int, inputs_hook=None):
    """ModelNew of `kernel` matches the float64 reference within the spec's tolerance."""
    dtype = DTYPES[dtype_name]
    ref, model, inputs = build(spec_name, constants, dtype, seed)
    if inputs_hook:
        inputs = inputs_hook(inputs)
    new = kernel.ModelNew(*ref.get_init_inputs())
    new.load_state_dict(model.state_dict())
    new = new.to(dtype)
    with torch.no_grad():
        with poisoned_allocations():
            out = new(*[x.clone() for x in inputs])
        expected = model(*inputs)
        want = copy.deepcopy(model).double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    where = f"{spec_name} {constants} {dtype_name} seed={seed}"
    assert out.shape == expected.shape and out.dtype == expected.dtype, f"{where}: {out.shape} {out.dtype}"
    if not out.is_floating_point():
        wrong = (out != want).sum().item()
        assert wrong == 0, f"{where}: {wrong} of {out.numel()} indices differ"
        return new, out
    tol = load_spec(SPECS / f"{spec_name}.yaml").tolerance(dtype_name)
    got = out.double()
    assert torch.isfinite(got).all(), f"{where}: {(~torch.isfinite(got)).sum().item()} NaN/Inf (unwritten?)"
    err = (got - want).abs()
    bad = err > tol.atol + tol.rtol * want.abs()
    assert not bad.any(), f"{where}: {bad.sum().item()} elements out of tolerance, max abs err {err.max().item():.3g}"
    return new, out


def test_every_config_override_here_is_a_declared_tunable_value():
    """The variants below are points of each kernel's declared search space, not ad-hoc settings."""
    for name, cases in CASES.items():
        declared = read_declared((KNOWLEDGE_BASE / "kernels" / f"{name}.py").read_text())
        for config, _, _ in cases:
            for key, value in config.items():
                assert value in declared.tunables[key], f"{name}: {key}={value!r} not in TUNABLES"


def test_every_benchmark_variant_is_a_declared_tunable_value():
    """bench/kernels/recsys/recsys_operators.py's sweep times points of each kernel's declared search space."""
    import importlib.util

    from kernelevolve.paths import REPO_ROOT

    spec = importlib.util.spec_from_file_location(
        "recsys_bench", REPO_ROOT / "bench" / "kernels" / "recsys" / "recsys_operators.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name, variants in bench.VARIANTS.items():
        declared = read_declared((KNOWLEDGE_BASE / "kernels" / f"{name}.py").read_text())
        for variant in variants:
            for key, value in variant.items():
                assert value in declared.tunables[key], f"{name}: {key}={value!r} not in TUNABLES"


# kernel -> [(CONFIG overrides, reference constants, dtypes)]
CASES = {
    "conv1d": [
        # B 1 where one sample takes the path the case is for (the interpreter's time is per program, and
        # B 2 only repeats the same program per sample): with B 1 each such case launches the kernel with
        # the same constexprs (tiles, blocks, path flags) as with B 2, half the programs. The sample offset
        # is the kernel's common prologue, checked with B 2-3 by the defaults, KSIZE 5 and 1, pairs and
        # quads at L 38, the "out" cases at L 38 and the flat tilings (where B is part of the tiling).
        # Shifted loads: 3 COUT tiles (the last partial), 3 L tiles (ragged); CIN 20 in one BLOCK_CI 32
        # slice (CIN over several slices, the last partial: the gather cases below).
        (
            {"BLOCK_CO": 32, "BLOCK_L": 32, "fp32_BLOCK_L": 32, "shift": "load", "fp32_shift": "load"},
            {"B": 1, "CIN": 20, "COUT": 70, "L": 75},
            ["float16", "float32"],
        ),
        # The defaults (FP16 gather, FP32 pairs) on the same shape, then with several L tiles.
        ({}, {"B": 2, "CIN": 20, "COUT": 70, "L": 75}, ["float16", "float32"]),
        (
            {"BLOCK_CO": 32, "BLOCK_L": 32, "fp32_BLOCK_L": 32, "align_hints": False},
            {"B": 1, "CIN": 20, "COUT": 70, "L": 75},
            ["float16", "float32"],
        ),
        # KSIZE 5 (pad 2 on both sides of a short row) in the weight's own layout; KSIZE 1.
        ({"packed_weight": False}, {"B": 2, "CIN": 16, "COUT": 24, "L": 7, "KSIZE": 5}, ["float16", "float32"]),
        ({}, {"B": 3, "CIN": 8, "COUT": 8, "L": 20, "KSIZE": 1}, ["float32"]),
        # Taps shifted on chip (one L tile covers the row), CIN in 2 slices (the last partial);
        # KSIZE 5; a row in 3 tiles (the columns shifted in from the neighbour tiles loaded alone);
        # KSIZE 5 with a row longer than the tile, where "gather" falls back to shifted loads.
        (
            {"shift": "gather", "fp32_shift": "gather", "BLOCK_CI": 16, "fp32_BLOCK_CI": 16, "small_grid_BLOCK_CI": 0},
            {"B": 1, "CIN": 20, "COUT": 24, "L": 37},
            ["float16", "float32"],
        ),
        ({"fp32_shift": "gather"}, {"B": 2, "CIN": 16, "COUT": 24, "L": 7, "KSIZE": 5}, ["float32"]),
        (
            {"shift": "gather", "fp32_shift": "gather", "BLOCK_L": 32, "fp32_BLOCK_L": 32},
            {"B": 1, "CIN": 16, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        ({"shift": "gather", "BLOCK_L": 32}, {"B": 2, "CIN": 16, "COUT": 24, "L": 75, "KSIZE": 5}, ["float16"]),
        # Next CIN slice prefetched (3 slices of 16, the last partial; 3 ragged L tiles); KSIZE 5
        # falls back to the plain loads.
        (
            {
                "shift": "prefetch",
                "fp32_shift": "prefetch",
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 1, "CIN": 40, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        ({"fp32_shift": "prefetch"}, {"B": 2, "CIN": 16, "COUT": 24, "L": 7, "KSIZE": 5}, ["float32"]),
        # Even and odd columns apart: 3 ragged L tiles with an odd L (the last pair half outside),
        # CIN in 3 slices (the last partial); a single tile, FP32 as bf16x3 and tf32x3; KSIZE 5
        # falls back to the plain loads.
        (
            {
                "shift": "pairs",
                "fp32_shift": "pairs",
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 1, "CIN": 40, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        ({"shift": "pairs"}, {"B": 3, "CIN": 20, "COUT": 24, "L": 38}, ["float16", "float32"]),
        ({"fp32_precision": "tf32x3"}, {"B": 3, "CIN": 20, "COUT": 24, "L": 38}, ["float32"]),
        # A grid smaller than the SM count (the interpreter counts 4) takes small_grid_BLOCK_CI
        # (CIN 40 in slices of 32, the last partial); without the override, slices of 16.
        ({}, {"B": 1, "CIN": 40, "COUT": 24, "L": 38}, ["float16", "float32"]),
        ({"small_grid_BLOCK_CI": 0}, {"B": 1, "CIN": 40, "COUT": 24, "L": 38}, ["float16", "float32"]),
        ({"shift": "pairs"}, {"B": 2, "CIN": 16, "COUT": 24, "L": 7, "KSIZE": 5}, ["float16", "float32"]),
        # L as the MMA's M and COUT in two pieces (70 as 64 + 16 rows, the second partial): gather /
        # pairs with the weight split on the host; pairs in 3 ragged L tiles, COUT 24 as 16 + 16.
        (
            {"orient": "l_m", "fp32_orient": "l_m", "split_co": True, "fp32_presplit": True},
            {"B": 1, "CIN": 20, "COUT": 70, "L": 75},
            ["float16", "float32"],
        ),
        (
            {
                "shift": "pairs",
                "orient": "l_m",
                "fp32_orient": "l_m",
                "split_co": True,
                "fp32_presplit": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
                "fp32_num_warps": 4,
            },
            {"B": 1, "CIN": 40, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        # The rows laid end to end ("flat"): tiles of 32 columns over B * L = 3 * 20 columns, so
        # tiles hold the end of one row and the start of the next (the shifted columns must not
        # cross it) and the last is partial; CIN in 2 slices (the last partial). pairs (L even) and
        # quads (L a multiple of 4), FP32 as bf16x3 with the weight split on the host.
        (
            {
                "shift": "pairs",
                "flat": True,
                "fp32_flat": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 3, "CIN": 20, "COUT": 24, "L": 20},
            ["float16", "float32"],
        ),
        (
            {
                "shift": "quads",
                "fp32_shift": "quads",
                "flat": True,
                "fp32_flat": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 3, "CIN": 20, "COUT": 70, "L": 20},
            ["float16", "float32"],
        ),
        # Shifted loads over the rows laid end to end (any KSIZE, any L): KSIZE 3 and 5 in tiles of
        # 32 columns across rows of 19, FP32 as bf16x3 with the weight split on the host.
        (
            {
                "shift": "load",
                "fp32_shift": "load",
                "flat": True,
                "fp32_flat": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
                "fp32_maxnreg": 128,
            },
            {"B": 3, "CIN": 20, "COUT": 24, "L": 19},
            ["float16", "float32"],
        ),
        (
            {"shift": "load", "fp32_shift": "load", "flat": True, "fp32_flat": True, "BLOCK_L": 32, "fp32_BLOCK_L": 32},
            {"B": 3, "CIN": 16, "COUT": 24, "L": 19, "KSIZE": 5},
            ["float16", "float32"],
        ),
        # quads per row: a ragged last tile (L 38 in tiles of 32, the quad at 36 half outside);
        # with flat and L not a multiple of 4 (38) the rows are tiled apart; KSIZE 5 falls back.
        (
            {"shift": "quads", "fp32_shift": "quads", "BLOCK_L": 32, "fp32_BLOCK_L": 32, "fp32_flat": True},
            {"B": 2, "CIN": 20, "COUT": 24, "L": 38},
            ["float16", "float32"],
        ),
        ({"fp32_shift": "quads"}, {"B": 2, "CIN": 16, "COUT": 24, "L": 7, "KSIZE": 5}, ["float32"]),
        # The shift moved to the output: one tile per row (COUT 70 as 64 + 16), then 3 ragged L
        # tiles (the rows from the neighbour tiles as matrix-vector products) in CIN slices of 16
        # (the last partial), FP32 split in the kernel and as tf32x3 (COUT 24 as one padded tile);
        # KSIZE 5 falls back to the plain loads.
        (
            {"shift": "out", "fp32_shift": "out", "split_co": True, "fp32_presplit": True},
            {"B": 1, "CIN": 20, "COUT": 70, "L": 75},
            ["float16", "float32"],
        ),
        (
            {
                "shift": "out",
                "fp32_shift": "out",
                "split_co": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 1, "CIN": 40, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        ({"fp32_shift": "out", "fp32_precision": "tf32x3"}, {"B": 2, "CIN": 20, "COUT": 24, "L": 38}, ["float32"]),
        # The same on even and odd columns apart (odd L: the last tile's last pair half outside).
        (
            {"shift": "pairs_out", "fp32_shift": "pairs_out", "split_co": True, "fp32_presplit": True},
            {"B": 1, "CIN": 20, "COUT": 70, "L": 75},
            ["float16", "float32"],
        ),
        (
            {
                "shift": "pairs_out",
                "fp32_shift": "pairs_out",
                "split_co": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 1, "CIN": 40, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        (
            {"fp32_shift": "pairs_out", "fp32_precision": "tf32x3"},
            {"B": 2, "CIN": 20, "COUT": 24, "L": 38},
            ["float32"],
        ),
        (
            {"shift": "out", "fp32_shift": "out"},
            {"B": 2, "CIN": 16, "COUT": 24, "L": 7, "KSIZE": 5},
            ["float16", "float32"],
        ),
        # One L tile covering the row without the neighbour columns (they are the padding); with 3
        # tiles the flag has no effect.
        (
            {"one_tile_halo": False, "shift": "gather", "fp32_shift": "pairs_out", "split_co": True},
            {"B": 1, "CIN": 20, "COUT": 70, "L": 75},
            ["float16", "float32"],
        ),
        (
            {"one_tile_halo": False, "shift": "out", "fp32_shift": "pairs_out", "fp32_presplit": True},
            {"B": 2, "CIN": 20, "COUT": 24, "L": 38},
            ["float16", "float32"],
        ),
        (
            {"one_tile_halo": False, "shift": "pairs_out", "fp32_shift": "gather", "BLOCK_L": 32, "fp32_BLOCK_L": 32},
            {"B": 1, "CIN": 20, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        # The next slice's x tile prefetched into registers: CIN 40 in slices of 16 (the last partial,
        # the prefetch past CIN masked off), 3 ragged L tiles; one tile.
        (
            {
                "prefetch_x": True,
                "shift": "gather",
                "fp32_shift": "pairs_out",
                "split_co": True,
                "BLOCK_CI": 16,
                "fp32_BLOCK_CI": 16,
                "small_grid_BLOCK_CI": 0,
                "BLOCK_L": 32,
                "fp32_BLOCK_L": 32,
            },
            {"B": 1, "CIN": 40, "COUT": 24, "L": 75},
            ["float16", "float32"],
        ),
        (
            {"prefetch_x": True, "one_tile_halo": False, "shift": "out", "fp32_shift": "gather", "split_co": True},
            {"B": 1, "CIN": 40, "COUT": 24, "L": 38},
            ["float16", "float32"],
        ),
        # Presplit weights with COUT as M (split_co then has no effect); shifted loads with L as M,
        # KSIZE 5 (no pieces: COUT 16 is one tile).
        ({"split_co": True, "fp32_presplit": True}, {"B": 1, "CIN": 20, "COUT": 24, "L": 38}, ["float16", "float32"]),
        (
            {"shift": "load", "fp32_shift": "load", "orient": "l_m", "fp32_orient": "l_m", "split_co": True},
            {"B": 2, "CIN": 16, "COUT": 16, "L": 7, "KSIZE": 5},
            ["float16", "float32"],
        ),
    ],
    "optimized_fm": [
        # N = 24 (padded to 32), D = 56 in slices of 16 (the last partial), K = 150 in tiles of 32. B 1
        # where the case is about one sample's tiles (the same launch constexprs as B 2, half the
        # programs); B 2-3 below check the sample offset.
        ({"BLOCK_K": 32, "BLOCK_D": 16}, {"B": 1, "N": 24, "D": 56, "K": 150}, ["bfloat16", "float32"]),
        ({}, {"B": 3, "N": 40, "D": 30, "K": 20}, ["bfloat16"]),
        (
            {"k_major": True, "BLOCK_K": 32, "BLOCK_D": 16},
            {"B": 1, "N": 24, "D": 56, "K": 150},
            ["bfloat16", "float32"],
        ),
        # N = 40 as 32 + 16 rows (the second block partial), N = 80 as 64 + 16; N = 24 is not split.
        (
            {"k_major": True, "split_n": True, "BLOCK_K": 32, "BLOCK_D": 16},
            {"B": 1, "N": 40, "D": 56, "K": 150},
            ["bfloat16", "float32"],
        ),
        ({"k_major": True, "split_n": True}, {"B": 2, "N": 80, "D": 30, "K": 20}, ["bfloat16"]),
        ({"k_major": True, "split_n": True}, {"B": 2, "N": 24, "D": 30, "K": 20}, ["bfloat16"]),
    ],
    "pffn": [
        # Rows in 3 tiles of 16 (the last partial), D = 40 padded to 64, K = 40 in two chunks of 32
        # (the last partial): the first RMSNorm's sum of squares spans chunks. (B 1 here and in the split
        # kernels' N = 70 case: one sample's tiles, the same launch constexprs as B 2; B 2-3 elsewhere.)
        ({"BLOCK_M": 16, "BLOCK_KC": 32}, {"B": 1, "N": 40, "D": 40, "K": 40}, ["bfloat16", "float32"]),
        ({}, {"B": 2, "N": 9, "D": 96, "K": 160}, ["bfloat16"]),
        ({"BLOCK_KC": 128}, {"B": 1, "N": 5, "D": 24, "K": 300}, ["float32"]),  # K > 256: three chunks
        # A small grid (2 x 1 tiles of 64 rows) shrinks its row tiles to 16: 3 tiles per sample.
        ({"min_programs": 512}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16"]),
        # The fused kernel with each GELU form (the default's "tanh_approx" runs as "tanh" here).
        ({"mode": "fused", "gelu": "erf"}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16"]),
        ({"mode": "fused", "gelu": "tanh"}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16"]),
        ({"mode": "fused", "gelu": "erf_poly"}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16"]),
        (
            {"split_min_batch": 0, "fused_max_d": 0, "gelu": "erf_poly"},
            {"B": 2, "N": 40, "D": 40, "K": 40},
            ["bfloat16"],
        ),
        # The split kernels: K = D = 40 as 32 + 16 columns (the second piece partial); N = 70 in two
        # 64-row tiles (the last partial), D = 96 contracted in slices of 32, K = 160 as 128 + 32;
        # K = 12 in one piece and D = 24 as 16 + 16.
        ({"split_min_batch": 0, "fused_max_d": 0}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16", "float32"]),
        (
            {"split_min_batch": 0, "fused_max_d": 0, "gelu": "erf", "down_BLOCK_K": 16},
            {"B": 1, "N": 70, "D": 96, "K": 160},
            ["bfloat16"],
        ),
        ({"split_min_batch": 0, "fused_max_d": 0}, {"B": 2, "N": 9, "D": 24, "K": 12}, ["bfloat16"]),
        # Persistent split kernels: 6 row tiles walked by 4 programs (the interpreter's "SM" count).
        (
            {"split_min_batch": 0, "fused_max_d": 0, "up_programs_per_sm": 1, "down_programs_per_sm": 1},
            {"B": 3, "N": 70, "D": 40, "K": 40},
            ["bfloat16"],
        ),
        # Split asked for, but K = 300 does not fit the split tile, the batch is below
        # split_min_batch, D is at most fused_max_d: all three run fused.
        ({"split_min_batch": 0, "fused_max_d": 0, "BLOCK_KC": 128}, {"B": 1, "N": 5, "D": 24, "K": 300}, ["float32"]),
        ({"fused_max_d": 0}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16"]),
        ({"split_min_batch": 0}, {"B": 2, "N": 40, "D": 40, "K": 40}, ["bfloat16"]),
    ],
    "mbdt": [
        # Features in 2 tiles of 32 (the last partial), rows in 3 tiles of 8; BORDERS 7 and 1.
        ({"BLOCK_B": 8, "BLOCK_F": 32}, {"BATCH": 20, "FEATURES": 40, "BORDERS": 7}, ["float32"]),
        (
            {"BLOCK_B": 8, "BLOCK_F": 32, "tile_borders": False},
            {"BATCH": 20, "FEATURES": 40, "BORDERS": 7},
            ["float32"],
        ),
        ({"BLOCK_B": 8, "BLOCK_F": 32, "rows_fastest": True}, {"BATCH": 20, "FEATURES": 40, "BORDERS": 7}, ["float32"]),
        ({"BLOCK_B": 8, "BLOCK_F": 32, "search": "linear"}, {"BATCH": 20, "FEATURES": 40, "BORDERS": 7}, ["float32"]),
        ({}, {"BATCH": 5, "FEATURES": 3, "BORDERS": 1}, ["float32"]),
        ({"search": "linear"}, {"BATCH": 64, "FEATURES": 2, "BORDERS": 16}, ["float32"]),
        # 4 row blocks of 8 per program (the last program's blocks partly or wholly past the rows),
        # with the border table and without; the linear count chosen by the border count.
        ({"BLOCK_B": 8, "BLOCK_F": 32, "row_blocks": 4}, {"BATCH": 45, "FEATURES": 40, "BORDERS": 7}, ["float32"]),
        (
            {"BLOCK_B": 8, "BLOCK_F": 32, "row_blocks": 2, "tile_borders": False},
            {"BATCH": 45, "FEATURES": 40, "BORDERS": 7},
            ["float32"],
        ),
        (
            {"BLOCK_B": 8, "BLOCK_F": 32, "row_blocks": 4, "linear_max_borders": 8},
            {"BATCH": 45, "FEATURES": 40, "BORDERS": 7},
            ["float32"],
        ),
    ],
}
SPEC_OF = {"conv1d": "conv1d", "optimized_fm": "optimized_fm", "pffn": "pffn", "mbdt": "mbdt"}


@pytest.mark.parametrize("name, index", [(n, i) for n, cases in CASES.items() for i in range(len(cases))])
def test_matches_float64_reference(name, index, tmp_path):
    config, constants, dtypes = CASES[name][index]
    kernel = load_kernel(name, tmp_path, **config)
    for dtype_name in dtypes:
        check(kernel, SPEC_OF[name], constants, dtype_name, random.randrange(2**31))


def test_conv1d_reads_strided_input_and_follows_weight_updates(tmp_path):
    """A transposed (non-contiguous) x is read through its strides; after an in-place weight update
    the module's packed copy is remade, so the output follows the new weight."""
    kernel = load_kernel("conv1d", tmp_path)
    constants = {"B": 2, "CIN": 12, "COUT": 10, "L": 19}
    given = []

    def strided(inputs):
        given.append(inputs[0].transpose(1, 2).contiguous().transpose(1, 2))
        return given

    new, before = check(kernel, "conv1d", constants, "float32", random.randrange(2**31), inputs_hook=strided)
    assert given[0].stride(2) != 1  # the check above ran on the transposed layout
    with torch.no_grad():
        new.weight.mul_(-2.0)
        after = new(given[0])
        bias = new.bias[None, :, None]
    torch.testing.assert_close(after - bias, -2.0 * (before - bias), atol=1e-5, rtol=1e-5)


def test_mbdt_ties_nan_and_infinities_land_where_searchsorted_puts_them(tmp_path):
    """A value equal to a border counts that border as not below it (left side); NaN goes last."""
    kernel = load_kernel("mbdt", tmp_path)

    def edge_values(inputs):
        values, borders, offsets = inputs
        values = values.clone()
        values[0, :] = borders[:, 0]  # equal to the first border: bin 0
        values[1, :] = borders[:, -1]  # equal to the last border: bin BORDERS - 1
        values[2, 0], values[2, 1], values[2, 2] = float("nan"), float("inf"), float("-inf")
        return [values, borders, offsets]

    _, out = check(
        kernel,
        "mbdt",
        {"BATCH": 6, "FEATURES": 3, "BORDERS": 4},
        "float32",
        random.randrange(2**31),
        inputs_hook=edge_values,
    )
    offsets = torch.arange(3) * 5
    assert out[0].tolist() == offsets.tolist()
    assert out[1].tolist() == (offsets + 3).tolist()
    assert out[2].tolist() == [0 + 4, 5 + 4, 10 + 0]


def test_pffn_refuses_rows_longer_than_the_tile(tmp_path):
    """The second RMSNorm needs whole rows of D in one tile: D > 256 is refused in one line."""
    kernel = load_kernel("pffn", tmp_path)
    x, w1, w2 = torch.randn(1, 2, 300), torch.randn(1, 300, 8), torch.randn(1, 8, 300)
    vec = lambda n: torch.ones(n)  # noqa: E731
    with pytest.raises(ValueError, match="D=300"):
        kernel.pffn_forward(x, w1, w2, vec(8), vec(8), vec(300), vec(300), 1e-6)


def test_benchmark_script_checks_every_variant_on_cpu(tmp_path):
    """bench/kernels/recsys/recsys_operators.py --device interpret: a real run of the script at the interpreter
    shapes, every sweep variant checked (what the GPU run will time), results written as JSON."""
    import json
    import subprocess
    import sys

    from kernelevolve.paths import REPO_ROOT

    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "kernels" / "recsys" / "recsys_operators.py"),
            "--device",
            "interpret",
            "--only",
            "mbdt",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "recsys_operators.json").read_text())
    spec = load_spec(SPECS / "mbdt.yaml")
    assert [r["shape"] for r in report["results"]] == spec.interpret_shapes
    for row in report["results"]:
        assert row["default"]["ok"] and row["default"]["ms"] is None  # checked, never timed on CPU
        assert len(row["variants"]) >= 5 and all(v["ok"] for v in row["variants"])
    assert len(list((tmp_path / "cases").glob("mbdt_*.json"))) == len(spec.interpret_shapes)
    no_gpu = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "kernels" / "recsys" / "recsys_operators.py"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if not torch.cuda.is_available():
        assert no_gpu.returncode == 2 and len(no_gpu.stderr.strip().splitlines()) == 1, no_gpu.stderr
