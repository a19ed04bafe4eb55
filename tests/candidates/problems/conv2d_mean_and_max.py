import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d -> (global average pool, global max pool): two outputs, returned as a tuple"""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        y = self.conv(x)
        return torch.mean(y, dim=[2, 3]), torch.amax(y, dim=[2, 3])


batch_size = 8
in_channels = 16
out_channels = 32
height, width = 64, 64
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
