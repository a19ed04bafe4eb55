"""What torch.compile makes of a problem's Model on this GPU: Inductor's output code and, for each Triton kernel in
it, the launch Inductor chose (its block sizes from autotuning, warps, stages) and its grid as expressions of the
kernel's own arguments. Needs CUDA (Inductor writes Triton only for GPUs); agent.inductor.translate turns what it
returns into a self-contained answer on any machine.

Compiled with dynamic shapes, so the code takes its sizes from its inputs: the harness checks an answer at several
sizes, and static code would only hold at the one it was compiled for. Three of dynamo's defaults are turned off for
that: duck sizing (two dimensions equal at capture, 128 x 128, would share one symbol and the code would assume
height == width everywhere), static parameter shapes (the harness's sizes resize the layers too) and lifting Python
floats to graph inputs (a module's constant multiplier is a constant of the code).

A worker mode of the harness (agent.harness.worker.main runs it behind the wall, so torch.compile never runs in the agent's
process); its result types are read by agent.inductor, which turns a capture into an answer.
"""

from __future__ import annotations

from typing import Any, Literal

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


def capture(model: Any, inputs: list[Any], dynamic: bool = True) -> Capture:
    """Compile `model` with Inductor, run it once on `inputs` (autotuning happens there) and read back what ran."""
    import torch
    import torch._dynamo.config as dynamo_config
    import torch.fx.experimental._config as fx_config
    import triton
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner, GridExpr
    from torch._inductor.utils import run_and_get_code

    graph_inputs: list[GraphInput] = []

    def inductor(gm: Any, example_inputs: list[Any]) -> Any:
        graph_inputs.clear()
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                graph_inputs.append(_graph_input(node))
        return compile_fx(gm, example_inputs)

    with torch.no_grad():
        eager = model(*inputs)
    settings: dict[str, Any] = {"specialize_float": True, "force_parameter_static_shapes": False,
                                "force_nn_module_property_static_shapes": False}
    dims = {"use_duck_shape": False}
    with dynamo_config.patch(settings), fx_config.patch(dims), torch.no_grad():  # type: ignore[attr-defined]
        _, codes = run_and_get_code(torch.compile(model, backend=inductor, dynamic=dynamic), *inputs)
        torch.cuda.synchronize()
    if len(codes) != 1:
        raise RuntimeError(f"torch.compile made {len(codes)} graphs of the Model (a graph break): one is needed")
    code = codes[0]
    module = next((m for m in reversed(PyCodeCache.modules) if _source(m) == code), None)
    if module is None:
        raise RuntimeError("Inductor's output module was not found among the loaded ones")
    kernels: dict[str, KernelLaunch] = {}
    for name, obj in vars(module).items():
        if not isinstance(obj, CachingAutotuner):
            continue
        if len(obj.launchers) != 1:
            raise RuntimeError(f"{name}: {len(obj.launchers)} launchers after a run (autotuning did not settle)")
        cfg = obj.launchers[0].config
        grid = GridExpr.from_meta(obj.inductor_meta, cfg)
        kernels[name] = KernelLaunch(
            config={k: int(v) for k, v in cfg.kwargs.items()}, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
            grid_prefix=list(grid.prefix), grid=[str(grid.x_grid), str(grid.y_grid), str(grid.z_grid)],
            arg_names=list(obj.fn.arg_names), grid_type=str(obj.inductor_meta.get("grid_type")))
    return Capture(torch_version=torch.__version__, triton_version=triton.__version__, dynamic=dynamic,
                   gpu=torch.cuda.get_device_name(), code=code, kernels=kernels, inputs=graph_inputs,
                   returns="tensor" if isinstance(eager, torch.Tensor) else "tuple")


def _graph_input(node: Any) -> GraphInput:
    import torch

    arg = node.meta.get("grapharg")
    source = getattr(arg, "source", None)
    name = getattr(source, "name", None)  # a method in torch 2.11, a property in later releases
    source = str(name() if callable(name) else name) if name is not None else None
    value = node.meta.get("example_value")
    if isinstance(value, torch.Tensor):
        return GraphInput(name=node.name, source=source, kind="tensor", shape=[str(s) for s in value.shape])
    if isinstance(value, (int, torch.SymInt)):
        return GraphInput(name=node.name, source=source, kind="int")
    if isinstance(value, (float, torch.SymFloat)):
        return GraphInput(name=node.name, source=source, kind="float")
    return GraphInput(name=node.name, source=source, kind="other")


def _source(module: Any) -> str | None:
    try:
        with open(module.__file__) as f:
            return f.read()
    except (OSError, AttributeError, TypeError):
        return None
