"""Reference: the same 1-D convolution as conv1d.py, computed by the channels_last conv2d trick.

x [B, CIN, L] is viewed as an image [B, CIN, 1, L] in channels_last layout and convolved with the
weight viewed as [COUT, CIN, 1, KSIZE]; cuDNN's NHWC kernels are often faster than its conv1d
path. The layout change of x is part of the call (the input arrives as [B, CIN, L]); the output
is returned as the [B, COUT, L] view of the channels_last result, without a copy.
Same parameters and constructor as conv1d.py, so one candidate serves both specs.
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
        bound = 1.0 / math.sqrt(in_channels * kernel_size)
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(out_channels).uniform_(-bound, bound))
        self.padding = kernel_size // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        image = x.unsqueeze(2).contiguous(memory_format=torch.channels_last)
        w = self.weight.unsqueeze(2).contiguous(memory_format=torch.channels_last)
        return F.conv2d(image, w, self.bias, padding=(0, self.padding)).squeeze(2)


def get_inputs():
    return [torch.randn(B, CIN, L)]


def get_init_inputs():
    return [CIN, COUT, KSIZE]
