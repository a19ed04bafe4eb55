import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Model that performs a convolution, global average pooling, adds a bias, and applies logsumexp over channels
    """

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)  # global average pooling
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return x


batch_size = 32
in_channels = 32
out_channels = 128
height, width = 128, 128
kernel_size = 3


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
