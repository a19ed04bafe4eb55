import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Model that performs a 3D convolution, applies ReLU, and global average pooling over depth, height and width
    """

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = torch.mean(x, dim=(2, 3, 4))  # global average pooling to [N, C]
        return x


batch_size = 16
in_channels = 16
out_channels = 32
depth, height, width = 16, 64, 64
kernel_size = 3


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
