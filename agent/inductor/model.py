"""What a capture of Inductor's output holds (agent.inductor.capture writes it, agent.inductor.translate reads it)."""

from __future__ import annotations

from pydantic import Field

from agent.schema import Model


class KernelLaunch(Model):
    """How Inductor launched one of its Triton kernels."""

    config: dict[str, int] = Field(description="the constexpr block sizes autotuning chose (XBLOCK, R0_BLOCK, ...)")
    num_warps: int
    num_stages: int
    grid_prefix: list[str] = Field(default_factory=list, description="assignments the grid expressions use")
    grid: list[str] = Field(description="x, y, z program counts as Python expressions of the kernel's arguments")
    arg_names: list[str] = Field(description="the kernel's parameters, in order (constexprs included)")
    grid_type: str = ""


class Capture(Model):
    """Inductor's output code for one Model and the launches it chose."""

    torch_version: str
    triton_version: str
    gpu: str
    dynamic: bool
    code: str = Field(description="the output code module, as Inductor wrote it")
    kernels: dict[str, KernelLaunch]
