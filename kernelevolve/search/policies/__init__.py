"""Selection policies, chosen by name: greedy, mcts, evolutionary."""

from __future__ import annotations

from kernelevolve.search.policies.base import Expansion, Policy
from kernelevolve.search.policies.evolutionary import Evolutionary
from kernelevolve.search.policies.greedy import Greedy
from kernelevolve.search.policies.mcts import MCTS

POLICIES: dict[str, type[Policy]] = {"greedy": Greedy, "mcts": MCTS, "evolutionary": Evolutionary}


def make_policy(name: str, **options) -> Policy:
    """A policy by name; options the policy does not take are an error (ValueError, one line)."""
    cls = POLICIES.get(name)
    if cls is None:
        raise ValueError(f"policy {name!r}: use one of {', '.join(POLICIES)}")
    try:
        return cls(**options)
    except TypeError as e:
        raise ValueError(f"policy {name!r}: {e}") from None


__all__ = ["Expansion", "Policy", "POLICIES", "make_policy", "Greedy", "MCTS", "Evolutionary"]
