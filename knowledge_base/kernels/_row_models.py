"""The nn.Module side of the row kernels, shared by an operator's Triton and CuTe DSL files: each
spec's Model constructor and parameters, so that a ModelNew says only which launcher its forward
calls (and the reference's state dict loads into it). Host code only (torch): any candidate may
import it, `from _row_models import ...` (knowledge_base/kernels is on the candidates' import path).
"""

import torch
import torch.nn as nn


class RMSNormModule(nn.Module):
    """specs/rmsnorm.py's Model(hidden_size, eps) parameters: `weight` [hidden_size] and `eps`."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # Not all ones, so that a correctness check exercises the weight.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))


class SoftmaxModule(nn.Module):
    """specs/softmax.py's Model(): no parameters, constructed without arguments."""

    def __init__(self):
        super().__init__()
