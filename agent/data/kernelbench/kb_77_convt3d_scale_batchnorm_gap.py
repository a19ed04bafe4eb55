"""Look-alike of KernelBench level 2 #77, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d -> x scale_factor -> BatchNorm3d (training mode: batch statistics) -> global average pool"""

    def __init__(self, in_channels, out_channels, kernel_size, scale_factor, eps=1e-5, momentum=0.1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor
        self.batch_norm = nn.BatchNorm3d(out_channels, eps=eps, momentum=momentum)
        self.gap = nn.AdaptiveAvgPool3d((1, 1, 1))

    def forward(self, x):
        y = self.conv_transpose(x) * self.scale_factor
        return self.gap(self.batch_norm(y))


batch_size = 16
in_channels = 64
out_channels = 128
depth, height, width = 16, 32, 32
kernel_size = 5
scale_factor = 2.0


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale_factor]
