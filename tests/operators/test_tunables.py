"""CONFIG rewriting and the offline operator's choice of configurations."""

import random

import pytest

from kernelevolve.operators import config_search as cs
from kernelevolve.operators.tunables import TunablesError, config_key, describe_change, read_declared, rewrite_config

SOURCE = '''"""A kernel."""
import triton  # noqa

CONFIG = {
    "BLOCK": 256,   # elements per program
    "num_warps": 4,
}
TUNABLES = {"BLOCK": [64, 128, 256, 512, 1024], "num_warps": [1, 2, 4, 8]}


def launch():
    return CONFIG["BLOCK"]  # CONFIG = {"BLOCK": 1} in a comment is not the assignment
'''


def test_rewrite_changes_only_the_values_that_move_and_keeps_the_layout():
    out = rewrite_config(SOURCE, {"BLOCK": 512})
    assert read_declared(out).config == {"BLOCK": 512, "num_warps": 4}
    # One knob per line, its comment and every other byte as they were: only the value moved.
    assert out == SOURCE.replace('"BLOCK": 256,   # elements per program', '"BLOCK": 512,   # elements per program')
    both = rewrite_config(SOURCE, {"BLOCK": 1024, "num_warps": 8})
    assert both.splitlines()[3:7] == [
        "CONFIG = {",
        '    "BLOCK": 1024,   # elements per program',
        '    "num_warps": 8,',
        "}",
    ]
    # Unchanged values (and a second identical rewrite) leave the file as it is.
    assert rewrite_config(SOURCE, {"BLOCK": 256}) == SOURCE
    assert rewrite_config(out, {"BLOCK": 512}) == out
    # A value of another type with an equal value (True == 1) is still written.
    flag = SOURCE.replace('"num_warps": 4,', '"num_warps": 4,\n    "fast": True,  # a flag').replace(
        '"num_warps": [1, 2, 4, 8]}', '"num_warps": [1, 2, 4, 8], "fast": [True, False]}'
    )
    assert '    "fast": 1,  # a flag' in rewrite_config(flag, {"fast": 1})


def test_the_reference_kernels_configs_stay_one_knob_per_line_through_a_rewrite():
    from kernelevolve.paths import knowledge_base

    for path in sorted((knowledge_base() / "kernels").glob("*.py")):
        source = path.read_text()
        try:
            declared = read_declared(source)
        except TunablesError:
            continue  # helpers declare no CONFIG
        lineno, _, end_lineno, _ = declared.span
        assert end_lineno - lineno + 1 >= len(declared.config), f"{path.name}: CONFIG is not one knob per line"
        moved = {k: v[-1] if v[-1] != declared.config[k] else v[0] for k, v in declared.tunables.items()}
        out = rewrite_config(source, moved)
        assert read_declared(out).config == {**declared.config, **moved}
        assert len(out.splitlines()) == len(source.splitlines()), path.name


def test_rewrite_rejects_unknown_keys_and_bad_declarations():
    with pytest.raises(TunablesError, match="no key"):
        rewrite_config(SOURCE, {"BLOCKK": 1})
    with pytest.raises(TunablesError, match="one module-level `TUNABLES"):
        read_declared("CONFIG = {'a': 1}\n")
    with pytest.raises(TunablesError, match="not a literal"):
        read_declared("CONFIG = dict(a=1)\nTUNABLES = {'a': [1]}\n")
    with pytest.raises(TunablesError, match="not a key of CONFIG"):
        read_declared("CONFIG = {'a': 1}\nTUNABLES = {'b': [1]}\n")


def test_describe_change():
    assert describe_change({"a": 1, "b": 2}, {"a": 1, "b": 4}) == "b 2->4"
    assert describe_change({"a": 1}, {"a": 1}) == "no change"


TUN = {"BLOCK": [64, 128, 256, 512, 1024], "num_warps": [1, 2, 4, 8]}


def test_neighbours_are_one_step_moves():
    got = cs.neighbours({"BLOCK": 256, "num_warps": 1}, TUN)
    assert {config_key(c) for c in got} == {
        config_key(c)
        for c in [{"BLOCK": 128, "num_warps": 1}, {"BLOCK": 512, "num_warps": 1}, {"BLOCK": 256, "num_warps": 2}]
    }


def test_local_move_prefers_untried_and_follows_momentum():
    rng = random.Random(0)
    start = {"BLOCK": 256, "num_warps": 4}
    tried = {config_key(start)}
    assert cs.local_move(start, TUN, tried, rng, momentum=("BLOCK", 1)) == {"BLOCK": 512, "num_warps": 4}
    # With every one- and two-knob neighbour tried, it still finds something new.
    for c in cs.neighbours(start, TUN, 1) + cs.neighbours(start, TUN, 2):
        tried.add(config_key(c))
    new = cs.local_move(start, TUN, tried, rng)
    assert new is not None and config_key(new) not in tried
    everything = {config_key({"BLOCK": b, "num_warps": w}) for b in TUN["BLOCK"] for w in TUN["num_warps"]}
    assert cs.local_move(start, TUN, everything, rng) is None


def test_same_rng_state_same_choice():
    start = {"BLOCK": 256, "num_warps": 4}
    picks = [cs.local_move(start, TUN, set(), random.Random(42)) for _ in range(3)]
    assert picks[0] == picks[1] == picks[2]


def test_debug_reverts_toward_the_last_passing_config():
    passing = {"BLOCK": 256, "num_warps": 4}
    failed = {"BLOCK": 1024, "num_warps": 8}
    new = cs.toward(failed, passing, TUN, {config_key(failed), config_key(passing)}, random.Random(1))
    assert new in ({"BLOCK": 256, "num_warps": 8}, {"BLOCK": 1024, "num_warps": 4})
    # Both single reverts tried: the values in between come next.
    tried = {config_key(c) for c in (failed, passing, {"BLOCK": 256, "num_warps": 8}, {"BLOCK": 1024, "num_warps": 4})}
    new = cs.toward(failed, passing, TUN, tried, random.Random(1))
    assert new == {"BLOCK": 512, "num_warps": 4}


def test_crossover_mixes_parents_and_never_returns_a_parent():
    a, b = {"BLOCK": 64, "num_warps": 1}, {"BLOCK": 1024, "num_warps": 8}
    child, from_b = cs.crossover(a, b, TUN, {config_key(a), config_key(b)}, random.Random(3))
    assert child in ({"BLOCK": 64, "num_warps": 8}, {"BLOCK": 1024, "num_warps": 1})
    assert from_b == [k for k in child if child[k] == b[k]]
    assert cs.crossover(a, a, TUN, set(), random.Random(3)) == (None, [])


def test_a_move_that_paid_off_elsewhere_is_tried_first_and_a_useless_one_last():
    base = {"BLOCK": 256, "num_warps": 4}
    evaluated = [
        ({"BLOCK": 128, "num_warps": 2}, 1.0),
        ({"BLOCK": 128, "num_warps": 4}, 1.3),  # warps 2->4 paid off
        ({"BLOCK": 64, "num_warps": 1}, 1.0),
        ({"BLOCK": 64, "num_warps": 2}, 1.0),
    ]  # warps 1->2 did nothing
    effects = cs.knob_effects(evaluated)
    assert effects[("num_warps", "2", "4")] == pytest.approx(1.3) and effects[("num_warps", "4", "2")] == pytest.approx(
        1 / 1.3
    )
    # From num_warps 2, the 2->4 move is taken at once, whatever the rng.
    start = {"BLOCK": 256, "num_warps": 2}
    picks = {
        config_key(cs.local_move(start, TUN, {config_key(start)}, random.Random(s), effects=effects)) for s in range(10)
    }
    assert picks == {config_key({"BLOCK": 256, "num_warps": 4})}
    # From num_warps 4, going back to 2 is known to lose: it comes after everything else.
    tried = {config_key(base)} | {
        config_key(c) for c in cs.neighbours(base, TUN, 1, 2) + cs.neighbours(base, TUN, 2, 1)
    }
    tried.discard(config_key({"BLOCK": 256, "num_warps": 2}))
    assert cs.local_move(base, TUN, tried, random.Random(0), effects=effects) == {"BLOCK": 256, "num_warps": 2}
    tried.discard(config_key({"BLOCK": 64, "num_warps": 4}))  # one two-step move left untried
    assert cs.local_move(base, TUN, tried, random.Random(0), effects=effects) == {"BLOCK": 64, "num_warps": 4}
