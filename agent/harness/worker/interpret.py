"""CPU mode: Triton's interpreter runs what the GPU compiler would, where the two differ on honest code.

Installed in the worker before the candidate is imported (trusted code, like candidate.AutotunePasses), only under
TRITON_INTERPRET=1. Each fix gives a kernel no reach it lacks on the GPU: the same scope, the same functions.

- Closures: the compiler resolves a jit function's names in its globals and its closure (JITFunction's capture
  scope); the interpreter re-executes the function's source in its globals alone, so a kernel built in a factory
  that reads a captured constant (`BLOCK = tl.constexpr(block)`) fails with a NameError.
- Range loops: the compiler's loop index of `range`/`tl.range` is a tensor (`row.to(tl.int64)` works on it); the
  interpreter leaves it a Python int. The rewritten loop makes it a tensor first, as the interpreter does for every
  assignment (`tl.static_range` keeps its Python int: the compiler unrolls that loop with a constant).
- libdevice: `triton.language.extra.libdevice` is a table of stubs the compiler maps to the backend's library; the
  interpreter calls the stubs, which return None. Those with a triton.language.math twin of the same meaning run as
  that twin (looked up at call time: the interpreter patches triton.language.math while a kernel runs).
- torch.cuda's device queries and synchronize: an answer may size its grid from
  `torch.cuda.get_device_properties("cuda").multi_processor_count` at import (Triton's persistent-kernel tutorials
  do), pick a block from `get_device_capability()`, or end its wrapper with `torch.cuda.synchronize()`. A PyTorch
  without CUDA raises there; where CUDA is not available they answer for the CPU, as the driver's queries do (one
  "multiprocessor" per core, capability (0, 0): no architecture's special paths), and synchronize returns at once
  (the interpreter's launches have finished when they return). torch.cuda.is_available() still says False.
- tl.dot's precision: on a GPU an fp32 tl.dot multiplies TF32 (10 mantissa bits) unless it asks for "ieee" or
  "tf32x3"; the interpreter multiplies in full fp32 whatever it asked. An answer whose default-precision dot loses
  5e-4 against the fp32 tolerance was judged correct in CPU mode (13 public answers) and would fail on the GPU. Its
  operands are rounded to TF32 as the GPU's conversion does (cvt.rna.tf32.f32: to nearest, ties away from zero).
- Speed: a jit helper's every call re-patched triton.language (inspect over whole modules) though the launch around
  it had; the repeat is skipped where nothing is left to patch (`_patched_once`).
- Speed: without debug the interpreter's device_assert does nothing, yet every int32 add, sub and mul first computed
  its overflow check (both operands cast to int64, the operation again, two comparisons, an and): ~70 % of a
  KernelBench #96 answer's validation under cProfile, and the whole manifest 230 -> 142 s. Where debug is off, the
  checks whose assert is dead are not computed (`_unchecked_overflow`); integers wrap as they did, as a compiled
  kernel's do.
- The driver: Triton's tutorials begin `DEVICE = triton.runtime.driver.active.get_active_torch_device()`; without a
  GPU no driver is active and that raises. The interpreter computes on the CPU, so where no driver is active the
  queries a kernel module may use (policy.toml's triton_api) answer for the CPU: a kernel's data lives there.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

# libdevice names whose triton.language.math function computes the same thing (CUDA's libdevice and HIP's ocml)
_LIBDEVICE_TWINS = ("abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2",
                    "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi")
_LIBDEVICE_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                      "triton.language.extra.hip.libdevice")


def install() -> None:
    _closures()
    _range_loops()
    _libdevice()
    _dot_precision()
    _driver()
    _synchronize()
    _patched_once()
    _unchecked_overflow()


def _unchecked_overflow() -> None:
    """The interpreter's builder without the int32 overflow checks whose assert is dead (debug off: module doc)."""
    import dataclasses

    from triton.runtime import interpreter

    builder: Any = getattr(interpreter, "interpreter_builder", None)
    options: Any = getattr(builder, "options", None)
    if "sanitize_overflow" not in getattr(options, "__dataclass_fields__", {}) or getattr(options, "debug", True):
        return  # another Triton, or asserts that fire: the interpreter as it is
    builder.options = dataclasses.replace(options, sanitize_overflow=False)


def _patched_once() -> None:
    """Speed, not meaning: every call of a jit helper from a kernel makes the interpreter patch triton.language
    again (`_patch_lang`: inspect.getmembers over each language module, its tensor class and math), which finds
    every builtin already patched by the launch around it and changes nothing; for a kernel calling a helper in a
    loop that was a third of CPU mode's time. Where every language module the function sees is patched already (its
    `arange` is no longer the builtin), the repeat is skipped; a module not yet patched (a helper that reads tl.core
    where its kernel read tl) is patched as before."""
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang", None)
    scope = getattr(interpreter, "_LangPatchScope", None)
    if original is None or scope is None or getattr(original, "_agent_once", False):
        return  # another Triton: its interpreter as it is

    def patch_lang(fn: Any) -> Any:
        langs = [v for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)]
        if langs and not any(tl.core.is_builtin(getattr(lang, "arange", None)) for lang in langs):
            return scope()  # nothing to patch, nothing to restore
        return original(fn)

    patch_lang._agent_once = True  # type: ignore[attr-defined]
    interpreter._patch_lang = patch_lang


def _closures() -> None:
    from triton.runtime import interpreter

    rewriter = interpreter.FunctionRewriter
    original = rewriter._compile_and_exec

    def compile_and_exec(self: Any, transformed_ast: Any) -> Any:
        fn = self.fn
        if fn.__closure__ is None:
            return original(self, transformed_ast)
        code = compile(transformed_ast, filename=self.filename, mode="exec")
        local: dict[str, Any] = {**self.kwargs}
        for key, value in vars(interpreter).items():  # what the original adds to the function's globals
            fn.__globals__.setdefault(key, value)
        nonlocals = {name: cell.cell_contents for name, cell in zip(fn.__code__.co_freevars, fn.__closure__)}
        exec(code, fn.__globals__ | nonlocals, local)  # JITFunction.get_capture_scope's scope
        return local[fn.__name__]

    rewriter._compile_and_exec = compile_and_exec


def _range_loops() -> None:
    import ast

    from triton.runtime import interpreter

    def visit_for(self: Any, node: ast.For) -> Any:
        node = self.generic_visit(node)
        call = node.iter
        ranged = isinstance(call, ast.Call) and (
            (isinstance(call.func, ast.Name) and call.func.id == "range")
            or (isinstance(call.func, ast.Attribute) and call.func.attr == "range"))
        if ranged and isinstance(node.target, ast.Name):
            to_tensor = ast.Attribute(value=ast.Name(id="interpreter_semantic", ctx=ast.Load()), attr="to_tensor",
                                      ctx=ast.Load())
            index = ast.Assign(targets=[ast.Name(id=node.target.id, ctx=ast.Store())],
                               value=ast.Call(func=to_tensor, args=[ast.Name(id=node.target.id, ctx=ast.Load()),
                                                                    ast.Constant(value=False)], keywords=[]))
            node.body.insert(0, ast.copy_location(index, node))
        return node

    interpreter.ASTTransformer.visit_For = visit_for


def _twin(name: str) -> Any:
    import triton.language as tl

    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("_semantic", None)
        return getattr(tl.math, name)(*args, **kwargs)

    call.__name__ = name
    return call


# libdevice names with no triton.language.math twin, computed elementwise by NumPy in the operands' own dtype
# (fast_* are the GPU's approximations of the same functions: within their error of the exact value)
_LIBDEVICE_NUMPY = {
    "tanh": "tanh", "fast_tanhf": "tanh", "sinh": "sinh", "cosh": "cosh", "tan": "tan", "fast_tanf": "tan",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
    "atanh": "arctanh", "atan2": "arctan2", "pow": "power", "fast_powf": "power", "log1p": "log1p",
    "expm1": "expm1", "log10": "log10", "fast_log10f": "log10", "exp10": "_exp10", "fast_exp10f": "_exp10",
    "fast_expf": "exp", "fast_logf": "log", "fast_log2f": "log2", "fast_sinf": "sin", "fast_cosf": "cos",
    "fast_dividef": "divide", "hypot": "hypot", "fmod": "fmod", "copysign": "copysign", "trunc": "trunc",
    "round": "_round", "rint": "rint", "nearbyint": "rint", "cbrt": "cbrt", "isnan": "isnan", "isinf": "isinf",
    "signbit": "signbit", "erfc": "_erfc",
}


def _numpy_function(name: str) -> Any:
    import math

    import numpy as np

    special = {"_exp10": lambda x: np.power(np.asarray(10.0, dtype=x.dtype), x),
               "_round": lambda x: np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)).astype(x.dtype),
               "_erfc": np.vectorize(math.erfc, otypes=[np.float64])}
    return special.get(name) or getattr(np, name)


def _numpy_libdevice(name: str, np_name: str) -> Any:
    fn = _numpy_function(np_name)

    def call(*args: Any, **kwargs: Any) -> Any:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter

        kwargs.pop("_semantic", None)
        first = next(a for a in args if isinstance(a, tl.tensor))
        data = [a.handle.data if isinstance(a, tl.tensor) else a for a in args]
        out = np.asarray(fn(*data))
        if out.dtype == np.bool_:
            return tl.tensor(interpreter.TensorHandle(out, tl.int1), first.type.with_element_ty(tl.int1)
                             if hasattr(first.type, "with_element_ty") else tl.int1)
        return tl.tensor(interpreter.TensorHandle(out.astype(first.handle.data.dtype), first.handle.dtype.scalar),
                         first.type)

    call.__name__ = name
    return call


def _libdevice() -> None:
    import triton.language as tl

    for module_name in _LIBDEVICE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in _LIBDEVICE_TWINS:
            if hasattr(module, name) and hasattr(tl.math, name):
                setattr(module, name, _twin(name))
        for name, np_name in _LIBDEVICE_NUMPY.items():
            if hasattr(module, name) and not (name in _LIBDEVICE_TWINS and hasattr(tl.math, name)):
                setattr(module, name, _numpy_libdevice(name, np_name))


def _tf32(data: Any) -> Any:
    """fp32 values rounded to TF32 (cvt.rna: to nearest, ties away from zero); inf and NaN kept."""
    import numpy as np

    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(data), rounded, data)


def _dot_precision() -> None:
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if getattr(input_precision, "name", str(input_precision)).upper() == "TF32" and \
                str(a.dtype) == "fp32" and str(b.dtype) == "fp32":
            a = interpreter.TensorHandle(_tf32(a.data), a.dtype)
            b = interpreter.TensorHandle(_tf32(b.data), b.dtype)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot


class _CpuUtils:
    @staticmethod
    def get_device_properties(device: Any = None) -> dict[str, int]:
        import os

        # the names CUDA's driver reports; one "multiprocessor" per core the interpreter may use
        return {"multiprocessor_count": os.cpu_count() or 1, "max_shared_mem": 232448, "max_num_regs": 65536,
                "warpSize": 32, "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}


class _CpuDriver:
    """The device queries of triton_api, answered for the CPU the interpreter runs on."""

    utils = _CpuUtils()

    @staticmethod
    def get_active_torch_device() -> Any:
        import torch

        return torch.device("cpu")

    @staticmethod
    def get_current_device() -> int:
        return 0

    @staticmethod
    def get_current_target() -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cpu", 0, 32)


def _driver() -> None:
    from triton.runtime import driver

    try:
        driver.active  # noqa: B018 (a GPU machine's driver, where one is active, stays)
    except RuntimeError:
        driver.set_active(_CpuDriver())


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        return
    torch.cuda.synchronize = _nothing_queued
    torch.cuda.current_device = _CpuDriver.get_current_device
    torch.cuda.get_device_properties = _cpu_properties  # type: ignore[assignment]
    torch.cuda.get_device_capability = _cpu_capability
    torch.cuda.get_device_name = _cpu_name


def _nothing_queued(device: Any = None) -> None:
    """torch.cuda.synchronize on a CPU: the interpreter's launches have finished when they return."""


def _cpu_capability(device: Any = None) -> tuple[int, int]:
    return (0, 0)


def _cpu_name(device: Any = None) -> str:
    return "cpu (Triton interpreter)"


@dataclass(frozen=True)
class _CpuProperties:
    """torch.cuda.get_device_properties' fields, for the CPU (the numbers _CpuUtils gives Triton's queries)."""

    multi_processor_count: int
    name: str = "cpu (Triton interpreter)"
    major: int = 0
    minor: int = 0
    total_memory: int = 0
    warp_size: int = 32
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 49152
    shared_memory_per_block_optin: int = 232448
    shared_memory_per_multiprocessor: int = 233472
    L2_cache_size: int = 0
    is_integrated: int = 0
    is_multi_gpu_board: int = 0


def _cpu_properties(device: Any = None) -> _CpuProperties:
    return _CpuProperties(multi_processor_count=_CpuUtils.get_device_properties()["multiprocessor_count"])
