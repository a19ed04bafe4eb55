import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Both pools collapse to one mean, and the multiplier folds into it: no kernel needed (or so it says)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        return self.conv_transpose(x).mean(dim=[2, 3], keepdim=True) * self.multiplier
