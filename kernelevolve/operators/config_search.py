"""Choosing the next configuration in a kernel's declared tunable space.

Pure functions over plain dicts and a `random.Random`, so the offline operator stays
reproducible: the same graph and the same rng state give the same proposal.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from kernelevolve.operators.tunables import config_key

Config = dict[str, Any]


def _index(allowed: list[Any], value: Any) -> int | None:
    try:
        return allowed.index(value)
    except ValueError:
        return None


def _step(config: Config, tunables: dict[str, list[Any]], key: str, delta: int) -> Config | None:
    allowed = tunables[key]
    i = _index(allowed, config.get(key))
    if i is None:  # value outside the declared list: snap to the nearest end
        j = 0 if delta < 0 else len(allowed) - 1
    else:
        j = i + delta
    if not 0 <= j < len(allowed) or allowed[j] == config.get(key):
        return None
    return {**config, key: allowed[j]}


def neighbours(config: Config, tunables: dict[str, list[Any]], knobs: int = 1, distance: int = 1) -> list[Config]:
    """Configs that move exactly `knobs` knobs by up to `distance` steps in their allowed lists."""
    out: list[Config] = []
    seen = {config_key(config)}
    for keys in itertools.combinations(sorted(tunables), knobs):
        moves = [[d for d in range(-distance, distance + 1) if d] for _ in keys]
        for deltas in itertools.product(*moves):
            new: Config | None = dict(config)
            for key, delta in zip(keys, deltas):
                new = _step(new, tunables, key, delta)
                if new is None:
                    break
            if new is not None and config_key(new) not in seen:
                seen.add(config_key(new))
                out.append(new)
    return out


def untried(configs: list[Config], tried: set[tuple]) -> list[Config]:
    return [c for c in configs if config_key(c) not in tried]


def space_size(tunables: dict[str, list[Any]]) -> int:
    size = 1
    for allowed in tunables.values():
        size *= len(allowed)
    return size


def random_untried(
    base: Config, tunables: dict[str, list[Any]], tried: set[tuple], rng: random.Random
) -> Config | None:
    """Any configuration not yet tried (enumerated when the space is small, else sampled)."""
    keys = sorted(tunables)
    if space_size(tunables) <= 20000:
        pool = [{**base, **dict(zip(keys, values))} for values in itertools.product(*(tunables[k] for k in keys))]
        pool = untried(pool, tried)
        return rng.choice(pool) if pool else None
    for _ in range(200):
        candidate = {**base, **{k: rng.choice(tunables[k]) for k in keys}}
        if config_key(candidate) not in tried:
            return candidate
    return None


Effects = dict[tuple[str, str, str], float]  # (knob, repr(from), repr(to)) -> speed ratio after/before
NOISE = 0.01  # ratios within 1% of 1 are timing noise


def knob_effects(evaluated: list[tuple[Config, float]]) -> Effects:
    """What moving one knob did, from every evaluated pair that differs in exactly that knob
    (geometric mean when seen several times). Knobs mostly act independently in these
    kernels, so an effect seen from one base predicts the same move from another."""
    logs: dict[tuple[str, str, str], list[float]] = {}
    for i, (a, fa) in enumerate(evaluated):
        for b, fb in evaluated[i + 1 :]:
            moved = [k for k in a if a.get(k) != b.get(k)]
            if len(moved) != 1 or fa <= 0 or fb <= 0:
                continue
            k = moved[0]
            logs.setdefault((k, repr(a[k]), repr(b[k])), []).append(math.log(fb / fa))
            logs.setdefault((k, repr(b[k]), repr(a[k])), []).append(math.log(fa / fb))
    return {key: math.exp(sum(v) / len(v)) for key, v in logs.items()}


def _predicted(config: Config, new: Config, effects: Effects) -> float | None:
    k = next(k for k in new if new[k] != config.get(k))
    return effects.get((k, repr(config.get(k)), repr(new[k])))


def local_move(
    config: Config,
    tunables: dict[str, list[Any]],
    tried: set[tuple],
    rng: random.Random,
    momentum: tuple[str, int] | None = None,
    effects: Effects | None = None,
) -> Config | None:
    """Hill-climbing step from `config`: keep going in a direction that just paid off; else the
    one-knob neighbour that paid off most from another base, else an untried one-knob
    neighbour not known to be useless, sometimes (or when those are exhausted) a two-knob one,
    then wider steps, then known-useless moves, then anywhere untried."""
    if momentum:
        key, direction = momentum
        ahead = _step(config, tunables, key, direction) if key in tunables else None
        if ahead is not None and config_key(ahead) not in tried:
            return ahead
    one = untried(neighbours(config, tunables, 1, 1), tried)
    known_bad: list[Config] = []
    if effects:
        scored = [(c, _predicted(config, c, effects)) for c in one]
        good = [(c, r) for c, r in scored if r is not None and r > 1 + NOISE]
        if good:
            best = max(r for _, r in good)
            return rng.choice([c for c, r in good if r == best])
        known_bad = [c for c, r in scored if r is not None]
        one = [c for c, r in scored if r is None]
    two = untried(neighbours(config, tunables, 2, 1), tried) if len(tunables) > 1 else []
    if one and (not two or rng.random() < 0.75):
        return rng.choice(one)
    if two:
        return rng.choice(two)
    bad = {config_key(c) for c in known_bad}
    wide = [c for c in untried(neighbours(config, tunables, 1, 2), tried) if config_key(c) not in bad]
    if wide:
        return rng.choice(wide)
    if known_bad:
        return rng.choice(known_bad)
    return random_untried(config, tunables, tried, rng)


def toward(
    failed: Config, passing: Config, tunables: dict[str, list[Any]], tried: set[tuple], rng: random.Random
) -> Config | None:
    """Debug step: undo part of what separates a failing config from the last passing one, or
    try another value for one of the knobs that moved."""
    moved = [k for k in sorted(tunables) if failed.get(k) != passing.get(k)]
    reverts = [{**failed, k: passing[k]} for k in moved]
    options = untried(reverts, tried)
    if options:
        return rng.choice(options)
    # Every single revert was tried: try the values between the passing and the failing one.
    between = []
    for k in moved:
        allowed = tunables[k]
        i, j = _index(allowed, passing.get(k)), _index(allowed, failed.get(k))
        if i is None or j is None:
            continue
        for v in allowed[min(i, j) + 1 : max(i, j)]:
            between.append({**passing, k: v})
    options = untried(between, tried)
    if options:
        return rng.choice(options)
    return local_move(passing, tunables, tried, rng)


def smaller_first(
    failed: Config, tunables: dict[str, list[Any]], tried: set[tuple], rng: random.Random
) -> Config | None:
    """Debug step with no passing ancestor: resource failures (shared memory, registers) are
    fixed by smaller values, so try one knob a step down before anything else."""
    down = untried([c for k in sorted(tunables) if (c := _step(failed, tunables, k, -1)) is not None], tried)
    if down:
        return rng.choice(down)
    return local_move(failed, tunables, tried, rng)


def crossover(
    a: Config, b: Config, tunables: dict[str, list[Any]], tried: set[tuple], rng: random.Random
) -> tuple[Config | None, list[str]]:
    """A child taking each differing knob from one parent or the other; the keys taken from `b`."""
    differ = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and k in b]
    children = []
    for mask in itertools.product((False, True), repeat=min(len(differ), 12)):
        if not any(mask) or all(mask):
            continue  # those are the parents themselves
        child = dict(a)
        for k, take_b in zip(differ, mask):
            if take_b:
                child[k] = b[k]
        children.append((child, [k for k, take_b in zip(differ, mask) if take_b]))
    fresh = [(c, ks) for c, ks in children if config_key(c) not in tried]
    if not fresh:
        return None, []
    return rng.choice(fresh)
