"""The interpreter's scaled shapes exercise what the GPU shapes will (campaign/scaling.py): sizes a `tl.dot`
can take (at least 16), ragged sizes kept ragged and powers of two kept powers of two, a head size that stays a
legal dot dimension, and small counts as written; all still a few tiles, not big."""

from pathlib import Path

from kernelevolve.campaign.scaling import KEEP, MAX_RAISED, MAX_SIZE, scaled_shape
from kernelevolve.shapes import constants

OPERATOR_PROBLEMS = Path(__file__).parents[1] / "operators" / "problems"


def _scaled(source: str) -> dict:
    return constants(source, scaled_shape(source))


def test_powers_of_two_stay_powers_of_two_and_ragged_sizes_stay_ragged():
    source = "A = 4096\nB = 1000\nC = 393\nE = 32\nF = 20\nG = 12\nH = 7\nI = 2**20\n"
    small = _scaled(source)
    assert (small["A"], small["E"], small["I"]) == (64, 16, 64)  # 2**k -> 2**ceil(k/2), at least 16, at most 64
    assert (small["C"], small["F"]) == (20, 17)  # about the square root, at least 17: never a power of two
    assert small["B"] % small["F"] == 0 and small["B"] == 34  # 20 | 1000 is kept: 33 (ragged) -> 34
    assert (small["G"], small["H"]) == (12, 7)  # at or below 16: as written
    ragged = [k for k, v in constants(source).items() if v & (v - 1)]
    assert all(small[k] & (small[k] - 1) for k in ragged)
    assert all(v >= KEEP for k, v in small.items() if k not in "GH")  # every scaled size can be a tl.dot dimension


def test_a_head_size_stays_a_legal_dot_dimension():
    source = (OPERATOR_PROBLEMS / "causal_self_attention.py").read_text()
    small = _scaled(source)
    assert small["n_head"] == 8 and small["n_embd"] // small["n_head"] == 16  # was 32 // 8 = 4
    assert small["n_embd"] <= MAX_RAISED and small["seq_len"] <= MAX_SIZE and small["batch_size"] <= MAX_SIZE
    # a count that merely divides another size (8 groups, 256-wide images) raises nothing
    groups = _scaled("batch_size = 16\nfeatures = 64\nnum_groups = 8\ndim1 = 256\ndim2 = 256\n")
    assert groups == {"batch_size": 16, "features": 16, "num_groups": 8, "dim1": 16, "dim2": 16}


def test_the_test_problems_stay_small():
    """The interpreter's cost grows with the product of the sizes: every problem here stays near what it was."""
    paths = sorted(OPERATOR_PROBLEMS.glob("*.py")) + sorted((Path(__file__).parent / "problems").glob("*.py"))
    assert len(paths) >= 10, paths  # both folders are read: a moved folder fails here, not silently
    for path in paths:
        source = path.read_text()
        shape = scaled_shape(source)
        values = [v for x in shape.values() for v in (x if isinstance(x, tuple) else (x,))]
        assert all(v <= MAX_RAISED for v in values), (path.name, shape)
        elements = 1
        for v in constants(source, shape).values():
            if isinstance(v, int) and not isinstance(v, bool) and v > 1:
                elements *= v
        assert elements <= 2**24, (path.name, shape)
