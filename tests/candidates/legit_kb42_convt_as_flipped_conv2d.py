import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def gap_bias_lse_sum_mul(y_ptr, bias_ptr, out_ptr, C, HW, inv_hw,
                         BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr):
    n = tl.program_id(0)
    c = tl.arange(0, BLOCK_C)
    cm = c < C
    base = y_ptr + n.to(tl.int64) * C * HW
    acc = tl.zeros((BLOCK_C, BLOCK_HW), tl.float32)
    for s in range(0, HW, BLOCK_HW):
        hw = s + tl.arange(0, BLOCK_HW)
        acc += tl.load(base + c[:, None] * HW + hw[None, :], mask=cm[:, None] & (hw[None, :] < HW), other=0.0)
    v = tl.sum(acc, axis=1) * inv_hw + tl.load(bias_ptr + c, mask=cm, other=0.0)
    v = tl.where(cm, v, -float("inf"))
    # log-sum-exp in base 2: exp2/log2 are the hardware's native ops
    LOG2E: tl.constexpr = 1.4426950408889634
    LN2: tl.constexpr = 0.6931471805599453
    mx = tl.max(v, axis=0)
    lse = mx + tl.log2(tl.sum(tl.exp2((v - mx) * LOG2E), axis=0)) * LN2
    tl.store(out_ptr + n, lse * 10.0)


class ModelNew(nn.Module):
    """A stride-1, unpadded ConvTranspose2d is a Conv2d with the kernel flipped, in/out swapped, padded by K-1:
    the weight is re-laid-out once (a buffer kept in sync through a load_state_dict hook) and cuDNN's forward
    conv runs it; the rest is one Triton kernel."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        ct = self.conv_transpose
        assert ct.stride == (1, 1) and ct.padding == (0, 0) and ct.output_padding == (0, 0) and ct.groups == 1
        self.register_buffer("w_fwd", self._relayout(ct.weight), persistent=False)
        self.register_load_state_dict_post_hook(self._refresh)

    @staticmethod
    @torch.no_grad()
    def _relayout(w: torch.Tensor) -> torch.Tensor:
        return w.transpose(0, 1).flip(2, 3).contiguous()

    def _refresh(self, module, incompatible_keys):
        self.w_fwd = self._relayout(self.conv_transpose.weight)

    def forward(self, x):
        K = self.w_fwd.shape[-1]
        y = F.conv2d(x, self.w_fwd, self.conv_transpose.bias, padding=K - 1)
        N, C, H, W = y.shape
        out = torch.empty((N, 1), device=y.device, dtype=y.dtype)
        BLOCK_C = triton.next_power_of_2(C)
        gap_bias_lse_sum_mul[(N,)](y, self.bias, out, C, H * W, 1.0 / (H * W),
                                   BLOCK_C=BLOCK_C, BLOCK_HW=max(16, 4096 // BLOCK_C))
        return out
