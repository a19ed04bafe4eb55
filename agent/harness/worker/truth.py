"""The fp64 truth against an output, for every precision's error (agent.harness.judge.validate, agent.harness.judge.kernelbench):
what the output's dtype can hold of the truth, and where an output is wrong in kind whatever the tolerance."""

from __future__ import annotations

from typing import Any


def representable(truth: Any, dtype: Any) -> Any:
    """The fp64 truth as an output of `dtype` can hold it: beyond the dtype's range, the infinity of its sign (fp32
    overflows at 3.4e38 where fp64 goes on to 1.8e308: KernelBench's cumprod on inputs of mean 5 reaches it in ~55
    steps, so any fp32 answer, eager's included, is inf there and right to be)."""
    import torch

    if not dtype.is_floating_point or dtype == torch.float64:
        return truth
    top = torch.finfo(dtype).max
    return torch.where(truth.abs() > top, truth.sign() * torch.inf, truth)


def wrong_in_kind(o: Any, t: Any) -> Any:
    """Where `o` is wrong in kind, whatever the tolerance: non-finite where the truth is finite, or not the truth's own
    NaN or infinity where the truth is one (a log of a negative is NaN in any implementation of it)."""
    import torch

    fin = torch.isfinite(t)
    same = (o == t) | (torch.isnan(o) & torch.isnan(t))
    return (~torch.isfinite(o) & fin) | (~fin & ~same)
