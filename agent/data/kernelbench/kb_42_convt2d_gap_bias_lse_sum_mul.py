"""Look-alike of KernelBench level 2 #42, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d -> global average pool -> + bias -> logsumexp over channels -> sum -> x 10"""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.conv_transpose(x)
        y = torch.mean(y, dim=(2, 3), keepdim=True) + self.bias
        y = torch.logsumexp(y, dim=1, keepdim=True)
        return torch.sum(y, dim=(2, 3)) * 10.0


batch_size = 16
in_channels = 64
out_channels = 128
height = width = 512
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
