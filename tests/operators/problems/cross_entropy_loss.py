"""KernelBench-style level 1 problem: mean cross-entropy loss of logits against class labels."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(predictions, targets)


batch_size = 4096
num_classes = 10
input_shape = (num_classes,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
