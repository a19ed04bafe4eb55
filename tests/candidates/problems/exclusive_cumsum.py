import torch
import torch.nn as nn


class Model(nn.Module):
    """An exclusive prefix sum along dim 1, written as KernelBench level 1 #92 writes it: a zero column put in front
    with torch.cat, the last row of the batch dropped ([:-1]), then cumsum."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        shifted = torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), x), dim=self.dim)[:-1]
        return torch.cumsum(shifted, dim=self.dim)


batch_size = 32
input_shape = (1000,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
