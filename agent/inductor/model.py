"""What a capture of Inductor's output holds (agent.inductor.capture writes it, agent.inductor.translate reads it)."""

from __future__ import annotations

from typing import Literal

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


class GraphInput(Model):
    """One input of the compiled graph (the output code's argN_1, in order) and where dynamo took it from."""

    name: str = Field(description="dynamo's placeholder name")
    source: str | None = Field(description="dynamo's source, e.g. L['self']._modules['conv']._parameters['weight'], "
                                           "L['x'], L['x'].size()[0]")
    kind: Literal["tensor", "int", "float", "other"]
    shape: list[str] = Field(default_factory=list, description="a tensor's sizes, symbolic where dynamic")


class Capture(Model):
    """Inductor's output code for one Model and the launches it chose."""

    torch_version: str
    triton_version: str
    gpu: str
    dynamic: bool
    code: str = Field(description="the output code module, as Inductor wrote it")
    kernels: dict[str, KernelLaunch]
    inputs: list[GraphInput] = Field(default_factory=list, description="the graph's inputs, in the code's order")
    returns: Literal["tensor", "tuple"] = Field(default="tensor", description="what the Model's forward returns")
