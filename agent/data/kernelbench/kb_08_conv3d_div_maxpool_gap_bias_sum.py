"""Look-alike of KernelBench level 2 #8, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d -> / divisor -> MaxPool3d -> global average pool -> + bias -> sum over channels"""

    def __init__(self, in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.max_pool = nn.MaxPool3d(pool_size)
        self.gap = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.sum_dim = sum_dim

    def forward(self, x):
        y = self.conv(x) / self.divisor
        y = self.gap(self.max_pool(y))
        return torch.sum(y + self.bias, dim=self.sum_dim)


batch_size = 128
in_channels = 8
out_channels = 16
depth = 16
height = width = 64
kernel_size = (3, 3, 3)
divisor = 2.0
pool_size = (2, 2, 2)
bias_shape = (out_channels, 1, 1, 1)
sum_dim = 1


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim]
