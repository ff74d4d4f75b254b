"""The input guard: a forward that writes into its inputs, or returns (a view of) one, is `mutates_input`.

A spec's operator is not in place unless it says so (`inplace`): a candidate that writes its result into
an input, or hands back a view of one, would pass a check whose reference reads the same buffers and
would change what the next timed call computes. `InputGuard` copies the inputs before a call and tells
afterwards which were changed (bit for bit, NaN-safe) and which outputs share memory with an input.
"""

from __future__ import annotations

import torch


class InputGuard:
    """A copy of the inputs before a call, to tell whether the call wrote into them."""

    def __init__(self, inputs: list):
        self.inputs = inputs
        self.copies = [x.detach().clone() if isinstance(x, torch.Tensor) else None for x in inputs]

    def mutated(self) -> list[int]:
        bad = []
        for i, (x, c) in enumerate(zip(self.inputs, self.copies)):
            if c is not None and not (x.shape == c.shape and x.dtype == c.dtype and _same_bits(x.detach(), c)):
                bad.append(i)
        return bad

    def aliased(self, outputs: list) -> list[tuple[int, int]]:
        """(output, input) pairs whose memory overlaps: a view of an input is not a result."""
        spans = []
        for i, x in enumerate(self.inputs):
            if isinstance(x, torch.Tensor) and x.numel():
                start = x.untyped_storage().data_ptr()
                spans.append((i, start, start + x.untyped_storage().nbytes()))
        pairs = []
        for o, out in enumerate(outputs):
            if not isinstance(out, torch.Tensor) or not out.numel():
                continue
            s = out.untyped_storage().data_ptr()
            e = s + out.untyped_storage().nbytes()
            pairs += [(o, i) for i, a, b in spans if s < b and a < e]
        return pairs


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe: a NaN written into an input is a change, one left alone is not)."""
    if not a.numel():
        return True
    return torch.equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))
