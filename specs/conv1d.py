"""Reference: 1-D convolution with bias, "same" padding (the convolutional-transformer layer of a
recommendation model), KernelBench convention.

x [B, CIN, L] -> y [B, COUT, L] = conv1d(x, weight [COUT, CIN, KSIZE], bias [COUT], padding=KSIZE // 2).
The baseline is F.conv1d itself (cuDNN). KSIZE is odd, so the output keeps length L.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 2048
CIN = 96
COUT = 96
L = 200
KSIZE = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_channels * kernel_size)  # nn.Conv1d's default range
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(out_channels).uniform_(-bound, bound))
        self.padding = kernel_size // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.weight, self.bias, padding=self.padding)


def get_inputs():
    return [torch.randn(B, CIN, L)]


def get_init_inputs():
    return [CIN, COUT, KSIZE]
