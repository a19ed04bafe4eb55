import torch
import torch.nn as nn
import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    # never split finer than the rows allow
    hw = named_args["HW"]
    kept = [c for c in configs if c.kwargs["BLOCK"] * c.kwargs["SPLIT"] <= max(hw, 1024)]
    return kept or configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256, "SPLIT": 4}, num_warps=4),
        triton.Config({"BLOCK": 1024, "SPLIT": 8}, num_warps=8),
    ],
    key=["HW", "ROWS"],
    prune_configs_by={"early_config_prune": _prune, "perf_model": None, "top_k": None},
    reset_to_zero=["out_ptr"],
)
@triton.jit
def split_gap_kernel(x_ptr, out_ptr, ROWS, HW, scale, BLOCK: tl.constexpr, SPLIT: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    chunk = tl.cdiv(HW, SPLIT)
    lo = part * chunk
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(lo, lo + chunk, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = (offs < lo + chunk) & (offs < HW)
        acc += tl.load(x_ptr + row.to(tl.int64) * HW + offs, mask=m, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = float(multiplier)

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C, H, W = y.shape
        out = torch.zeros(N * C, device=y.device, dtype=torch.float32)
        grid = lambda meta: (N * C, meta["SPLIT"])
        split_gap_kernel[grid](y, out, N * C, H * W, self.multiplier / (H * W))
        return out.view(N, C, 1, 1).to(x.dtype)
