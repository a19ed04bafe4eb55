"""Look-alike of KernelBench level 2 #67, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d -> GELU -> global average pool, squeezed to (batch, channels)"""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.conv(x))
        y = torch.nn.functional.adaptive_avg_pool2d(y, 1)
        return y.squeeze(-1).squeeze(-1)


batch_size = 128
in_channels = 8
out_channels = 64
height, width = 256, 256
kernel_size = 3


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
