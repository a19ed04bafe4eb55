"""Look-alike of KernelBench level 2 #51, written for this project (see README.md)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> - parameter -> mean over features -> logsumexp -> GELU -> + the input"""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        residual = x.clone().detach()
        y = self.gemm(x) - self.subtract
        y = torch.mean(y, dim=1, keepdim=True)
        y = torch.logsumexp(y, dim=1, keepdim=True)
        y = torch.nn.functional.gelu(y)
        return y + residual


batch_size = 2048
in_features = 8192
out_features = 8192


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
