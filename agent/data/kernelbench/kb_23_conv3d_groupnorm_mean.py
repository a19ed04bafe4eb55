"""Look-alike of KernelBench level 2 #23, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d -> GroupNorm -> mean over channels and space (one value per sample)"""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = self.norm(self.conv(x))
        return y.mean(dim=[1, 2, 3, 4])


batch_size = 128
in_channels = 3
out_channels = 24
D, H, W = 24, 32, 32
kernel_size = 3
num_groups = 8


def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
