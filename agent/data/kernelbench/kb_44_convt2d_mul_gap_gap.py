"""Look-alike of KernelBench level 2 #44, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d -> x multiplier -> global average pool -> global average pool"""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x) * self.multiplier
        y = torch.mean(y, dim=[2, 3], keepdim=True)
        return torch.mean(y, dim=[2, 3], keepdim=True)  # a second pool of a 1x1 plane: the identity


batch_size = 16
in_channels = 64
out_channels = 128
height, width = 128, 128
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
multiplier = 0.5


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier]
