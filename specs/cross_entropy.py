"""Cross-entropy forward, per-row losses, KernelBench convention.

loss[i] = logsumexp(logits[i]) - logits[i, target[i]], computed in fp32 (or wider), reduction
"none"; rows whose target is IGNORE_INDEX get 0 (F.cross_entropy semantics).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 4096  # rows (tokens)
V = 32000  # classes (vocabulary)
IGNORE_INDEX = -100
IGNORED_FRACTION = 0.05  # share of rows whose target is IGNORE_INDEX (padding tokens)


class Model(nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        acc = torch.promote_types(logits.dtype, torch.float32)
        return F.cross_entropy(logits.to(acc), target, reduction="none", ignore_index=self.ignore_index)


def get_inputs():
    logits = 3.0 * torch.randn(M, V)
    target = torch.randint(0, V, (M,))
    target[torch.rand(M) < IGNORED_FRACTION] = IGNORE_INDEX
    return [logits, target]


def get_init_inputs():
    return [IGNORE_INDEX]
