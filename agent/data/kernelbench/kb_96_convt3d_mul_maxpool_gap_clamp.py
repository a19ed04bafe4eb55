"""Look-alike of KernelBench level 2 #96, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d -> x scale -> MaxPool3d -> global average pool -> clamp to [0, 1]"""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.scale = scale
        self.max_pool = nn.MaxPool3d(kernel_size=maxpool_kernel_size)
        self.gap = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.clamp_min, self.clamp_max = 0, 1

    def forward(self, x):
        y = self.max_pool(self.conv_transpose(x) * self.scale)
        return torch.clamp(self.gap(y), min=self.clamp_min, max=self.clamp_max)


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
scale = 0.5
maxpool_kernel_size = 2


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size]
