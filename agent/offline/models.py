"""The offline proposer's vocabulary: what a recognised problem is (Plan) and one point of the search (Variant)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Family = Literal["row", "split", "atomic", "persistent", "algebraic", "nhwc", "fused", "pool", "pool_fused"]


class Unsupported(Exception):
    """The problem is not of a family the offline proposer can rewrite (the message says where it stopped)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Operand(_Model):
    """The other side of a binary op: a Python scalar, or a tensor with one value or one per channel."""

    kind: Literal["scalar", "single", "channel"]
    expr: str = Field(description="how ModelNew.forward names it: 'self.multiplier', 'self.bias', '0.5'")


class Op(_Model):
    name: str = Field(description="a key of ops.toml's [binary] or [unary]")
    operand: int | None = Field(default=None, description="index into Plan.operands (binary ops)")


class RowTail(_Model):
    """What follows the pool when it reduces over the channels: each batch row's C pooled values (post ops applied)
    reduced to one value, then per-row ops on it; written by a second, tiny Triton kernel (agent.offline.tail)."""

    reduce: str = Field(description="a key of ops.toml's [channel_reduce]")
    ops: list[Op] = Field(default_factory=list, description="per-row ops after the reduction (scalar operands only)")
    out_ones: int = Field(description="size-1 dims after the batch dim in what the tail returns: (N, 1, ...)")


class Plan(_Model):
    """What the problem computes, in the terms the templates need."""

    init_source: str = Field(description="Model.__init__ as ModelNew's (same signature, same parameters)")
    producer: list[str] = Field(description="module attributes ModelNew.forward still calls in PyTorch, in order")
    producer_kind: str
    pre: list[Op] = Field(description="per-element ops before the reduction (up to the last non-affine one); with a "
                          "window, before its max")
    window: list[int] | None = Field(default=None, description="a max-pool before the mean: its window per spatial "
                                     "dim (stride = window, no padding, floor), as KernelBench #8 and #96 have")
    pooled: list[Op] = Field(default_factory=list, description="per-element ops on the window maxima, before the mean "
                             "(up to the last non-affine one)")
    post: list[Op] = Field(description="per-row ops after the mean (affine pre ops are moved here)")
    operands: list[Operand]
    rowwise: RowTail | None = Field(default=None, description="the reduction over the channels after the pool, if any")
    tail: list[str] = Field(default_factory=list, description="PyTorch views of the Triton part's output (x = "
                                                               "x.squeeze(-1), ...): shape only, never compute")
    out_ones: int = Field(description="trailing size-1 dims of what the family's kernel returns (N, C, 1, ...)")
    batch: int
    channels: int
    length: int = Field(description="spatial elements per (n, c) row at the timed size")
    in_bytes: int
    mid_bytes: int = Field(description="bytes of the producer's output at the timed size")
    algebraic: bool = Field(description="the closed-form rewrite applies (ConvTranspose2d, affine epilogue)")
    conv_fn: str | None = Field(default=None, description="the producer as a torch.nn.functional call ('conv2d', "
                                "'conv_transpose2d') where it is one zero-padded 2D or 3D convolution: what the "
                                "channels-last variants call, without its bias")
    conv_bias: bool = Field(default=False, description="that convolution has a bias (folded into the epilogue)")
    conv_k: int | None = Field(default=None, description="the convolution's reduction length (in channels x kernel "
                               "height x width) where the `fused` family can compute it in the kernel: an nn.Conv2d "
                               "with groups 1 and zero padding")
    window_fused: bool = Field(default=False, description="the `pool_fused` family applies: an nn.ConvTranspose3d "
                               "(groups 1, dilation 1, no output padding, one kernel size, stride and padding for all "
                               "dims) whose stride divides the max-pool's window (the same for all dims)")

    @property
    def rows(self) -> int:
        return self.batch * self.channels


class Variant(_Model):
    """One point of the search: a template and its meta-parameters."""

    family: Family
    block: int = Field(description="elements per load (algebraic: input rows per tile)")
    warps: int
    stages: int
    split: int = Field(default=1, description="split/atomic: programs per row; persistent: programs per SM; "
                                              "algebraic: input columns per tile; nhwc: programs per (n, channel "
                                              "block), 1: one launch; fused: programs per (n, channel block); "
                                              "pool: programs per (n, c) row")

    @property
    def key(self) -> tuple:
        return (self.family, self.block, self.warps, self.stages, self.split)

    def idea(self) -> str:
        """'split: 4 programs/row, BLOCK 2048, 4 warps, 2 stages': the memory's idea for this variant (one per key)."""
        return f"{self.family}: {self.params()}"

    def params(self) -> str:
        """'BLOCK 4096, 8 warps, 2 stages', with the family's own knob first."""
        rest = f"{self.warps} warps, {self.stages} stage{'s' * (self.stages > 1)}"
        if self.family == "algebraic":
            return f"tile {self.block}x{self.split}, {rest}"
        lead = {"split": f"{self.split} programs/row, ", "atomic": f"{self.split} programs/row, ",
                "persistent": f"{self.split} programs/SM, ",
                "nhwc": f"channels-last conv, bias in the epilogue, {self.split} programs per (n, channels), ",
                "fused": f"conv in the kernel (implicit GEMM, 3xTF32), {self.split} programs per (n, channels), ",
                "pool": f"window max + mean in one pass, {self.split} programs/row, ",
                "pool_fused": "transposed conv + window max + mean in one kernel, "}.get(
            self.family, "")
        return f"{lead}BLOCK {self.block}, {rest}"
